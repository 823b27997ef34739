"""Who is calling: resolved from the API key or the session, never from the request body."""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from infrastructure.errors import Forbidden
from infrastructure.inputs import text_problem

from .auth import KeyUser
from .models import Agent, ApiKey, Membership, Organization


@dataclass(frozen=True)
class Caller:
    organization: Organization
    agent: Agent | None = None
    user: AbstractBaseUser | None = None
    api_key: ApiKey | None = None

    @property
    def agent_id(self) -> int | None:
        return self.agent.pk if self.agent is not None else None

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
        if self.api_key is not None:
            return f"org-key:{self.api_key.prefix}"
        return "system"

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


# One builder per door: an API key (REST and MCP), a member (the REST session, the admin), a
# management command, and code that acts as an agent of its own accord (the demo's sessions).


def caller_for_key(key: ApiKey) -> Caller:
    """An API key's caller: its agent, or the organization itself for an organization key."""
    return Caller(organization=key.organization, agent=key.agent, api_key=key)


def caller_for_member(user, organization: Organization) -> Caller:
    """A logged-in human acting for `organization` (a member's session, or staff in the admin)."""
    return Caller(organization=organization, user=user)


def caller_for_admin(request, organization: Organization) -> Caller:
    """A staff user acting in the admin for `organization` (its scoping is the admin's)."""
    return caller_for_member(request.user, organization)


def caller_for_command(organization: Organization) -> Caller:
    """The organization's humans acting from a management command (no key, no user): "system"."""
    return Caller(organization=organization)


def caller_for_agent(agent: Agent) -> Caller:
    """An agent acting without a request (the demo, a management command)."""
    return Caller(organization=agent.organization, agent=agent)


def resolve_caller(request) -> Caller | None:
    """The caller of an authenticated request, or None when it has no organization."""
    cached = getattr(request, "_agent_org_caller", None)
    if cached is not None:
        return cached
    user = request.user
    caller = None
    if isinstance(user, KeyUser):
        caller = caller_for_key(user.api_key)
    elif user is not None and user.is_authenticated:
        organization = organization_of_member(user, request)
        if organization is not None:
            caller = caller_for_member(user, organization)
    request._agent_org_caller = caller
    return caller


# For API views: `self.caller`, resolved once per request (authentication has run). A comment,
# not a docstring: drf-spectacular would publish a docstring as every view's description.
class CallerMixin:
    @property
    def caller(self) -> Caller:
        return resolve_caller(self.request)


def organization_of_member(user, request) -> Organization | None:
    """The organization a logged-in human acts for: `X-Organization` / `?org=` or their only one."""
    slug = request.headers.get("X-Organization") or request.GET.get("org")
    if user.is_superuser:
        orgs = Organization.objects.all()
    else:
        orgs = Organization.objects.filter(memberships__user=user, memberships__is_admin=True)
    if slug:
        # A slug the database cannot hold as text (NUL) names none of them.
        return None if text_problem(slug) else orgs.filter(slug=slug).first()
    found = list(orgs[:2])
    return found[0] if len(found) == 1 else None


def admin_organizations(user):
    """Organizations this staff user may edit in the admin."""
    if user.is_superuser:
        return Organization.objects.all()
    return Organization.objects.filter(
        pk__in=Membership.objects.filter(user=user, is_admin=True).values("organization_id")
    )
