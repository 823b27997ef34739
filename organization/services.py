"""Writes of the organization app. Each is one transaction."""

from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from .auth import generate_key
from .models import Agent, ApiKey, Organization


@transaction.atomic
def api_key_create(
    *, organization: Organization, agent: Agent | None = None, name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is never stored nor shown again."""
    plaintext, prefix, digest = generate_key()
    key = ApiKey.objects.create(
        organization=organization, agent=agent, name=name, prefix=prefix, digest=digest
    )
    return key, plaintext


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


@transaction.atomic
def agent_set_paused(*, agents: QuerySet[Agent], paused: bool) -> int:
    """Pause (offline: receives nothing) or resume agents; returns how many changed.

    A resumed agent with room at once receives the tasks that waited in its queue (rule 5).
    """
    from tasks.services import fill_from_queue  # late: the tasks app is built on this one

    # The admin's queryset carries a GROUP BY annotation; go through a plain pk subquery.
    changed = list(
        Agent.objects.filter(pk__in=agents.order_by().values("pk"))
        .exclude(is_paused=paused)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    Agent.objects.filter(pk__in=changed).update(is_paused=paused, updated_at=timezone.now())
    if not paused:
        for agent in Agent.objects.filter(pk__in=changed).order_by("pk"):
            fill_from_queue(agent)
    return len(changed)


def agent_room_changed(*, agent: Agent) -> None:
    """An agent was resumed or given more capacity by hand: hand it the queued tasks that fit."""
    from tasks.services import fill_from_queue  # late: the tasks app is built on this one

    with transaction.atomic():
        fill_from_queue(agent)


def agent_set_availability(*, agent: Agent, until: datetime | None) -> Agent:
    """Seed 001's `availability_until`, set by the agent itself: when it expects to be free
    (None: available indefinitely). The roster shows it; queue wait estimates use it."""
    Agent.objects.filter(pk=agent.pk).update(availability_until=until, updated_at=timezone.now())
    agent.availability_until = until
    return agent
