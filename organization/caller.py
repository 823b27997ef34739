"""Who is calling: resolved from the API key or the session, never from the request body."""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from .auth import KeyUser
from .errors import Forbidden
from .models import Agent, ApiKey, Membership, Organization


@dataclass(frozen=True)
class Caller:
    organization: Organization
    agent: Agent | None = None
    user: AbstractBaseUser | None = None
    api_key: ApiKey | None = None

    @property
    def is_human(self) -> bool:
        """Organization keys and admin members act as a human administrator."""
        return self.agent is None

    @property
    def label(self) -> str:
        if self.agent is not None:
            return self.agent.handle
        if self.user is not None:
            return f"user:{self.user.get_username()}"
        return f"org-key:{self.api_key.prefix}"

    def require_agent(self) -> Agent:
        if self.agent is None:
            raise Forbidden("This call needs an agent key: it acts as one agent.", "agent_required")
        return self.agent

    def require_human(self) -> None:
        if self.agent is not None:
            raise Forbidden(
                "Only an organization key or an admin member may do this: "
                "the hierarchy is human-defined.",
                "human_required",
            )


def resolve_caller(request) -> Caller | None:
    """The caller of an authenticated request, or None when it has no organization."""
    cached = getattr(request, "_agent_org_caller", None)
    if cached is not None:
        return cached
    user = request.user
    caller = None
    if isinstance(user, KeyUser):
        key = user.api_key
        caller = Caller(organization=key.organization, agent=key.agent, api_key=key)
    elif user is not None and user.is_authenticated:
        organization = organization_of_member(user, request)
        if organization is not None:
            caller = Caller(organization=organization, user=user)
    request._agent_org_caller = caller
    return caller


def organization_of_member(user, request) -> Organization | None:
    """The organization a logged-in human acts for: `X-Organization` / `?org=` or their only one."""
    slug = request.headers.get("X-Organization") or request.GET.get("org")
    if user.is_superuser:
        orgs = Organization.objects.all()
    else:
        orgs = Organization.objects.filter(memberships__user=user, memberships__is_admin=True)
    if slug:
        return orgs.filter(slug=slug).first()
    found = list(orgs[:2])
    return found[0] if len(found) == 1 else None


def admin_organizations(user):
    """Organizations this staff user may edit in the admin."""
    if user.is_superuser:
        return Organization.objects.all()
    return Organization.objects.filter(
        pk__in=Membership.objects.filter(user=user, is_admin=True).values("organization_id")
    )
