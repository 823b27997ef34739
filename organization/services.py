"""Writes of the organization app. Each is one transaction."""

from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.dispatch import Signal
from django.utils import timezone

from .auth import generate_key
from .history import record_changes
from .models import Agent, ApiKey, Organization

# Sent (inside the write's transaction) with `agent=` when an agent was resumed or given more
# capacity by hand. The tasks app, built on this one, hands it the queued tasks that now fit.
agent_gained_room = Signal()


def api_key_create(
    *, organization: Organization, agent: Agent | None = None, name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is never stored nor shown again."""
    key = ApiKey(organization=organization, agent=agent, name=name)
    return key, api_key_issue(key=key)


@transaction.atomic
def api_key_issue(*, key: ApiKey) -> str:
    """Give the unsaved `key` (organization, agent, name set) a secret, save it, and return the
    plaintext, which is never stored nor shown again. The admin's add form saves through this."""
    plaintext, key.prefix, key.digest = generate_key()
    key.save(force_insert=True)
    return plaintext


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
    # The admin's queryset carries a GROUP BY annotation; go through a plain pk subquery.
    changed = list(
        Agent.objects.filter(pk__in=agents.order_by().values("pk"))
        .exclude(is_paused=paused)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    Agent.objects.filter(pk__in=changed).update(is_paused=paused, updated_at=timezone.now())
    record_changes(Agent.objects.filter(pk__in=changed).order_by("pk"))
    if not paused:
        for agent in Agent.objects.filter(pk__in=changed).order_by("pk"):
            agent_gained_room.send(sender=Agent, agent=agent)
    return len(changed)


def agent_room_changed(*, agent: Agent) -> None:
    """An agent was resumed or given more capacity by hand: hand it the queued tasks that fit."""
    with transaction.atomic():
        agent_gained_room.send(sender=Agent, agent=agent)


@transaction.atomic
def agent_set_availability(*, agent: Agent, until: datetime | None) -> Agent:
    """Seed 001's `availability_until`, set by the agent itself: when it expects to be free
    (None: available indefinitely). The roster shows it; queue wait estimates use it."""
    Agent.objects.filter(pk=agent.pk).update(availability_until=until, updated_at=timezone.now())
    record_changes(Agent.objects.filter(pk=agent.pk))
    agent.availability_until = until
    return agent
