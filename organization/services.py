"""Writes of the organization app. Each is one transaction."""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.dispatch import Signal
from django.utils import timezone

from infrastructure.errors import Conflict

from . import remote_a2a, workload
from .auth import generate_key
from .caller import Caller
from .hierarchy import drop_default_supervisor
from .history import record_changes
from .models import Agent, ApiKey, Organization, new_webhook_secret

# Sent (inside the write's transaction) with `agent=` when an agent was resumed or given more
# capacity by hand. The tasks app, built on this one, hands it the queued tasks that now fit.
agent_gained_room = Signal()

# Sent (inside the deletion's transaction) with `agent=` and `caller=` just before an agent is
# deleted. The tasks app moves the tasks it holds or is queued for (rule 6: escalated, each move
# with its TaskEvent) and returns them; without that they would be left held by nobody.
agent_leaving = Signal()


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
def webhook_secret_rotate(*, organizations: QuerySet[Organization]) -> int:
    """A new webhook secret for each organization (receivers check `X-Agent-Org-Signature` with
    it: one that leaked is replaced); deliveries signed from now on use it."""
    rotated = 0
    for organization in organizations.only("pk"):
        organization.webhook_secret = new_webhook_secret()
        organization.save(update_fields=["webhook_secret"])
        rotated += 1
    return rotated


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


def agent_take_card(agent: Agent, card: dict) -> list[str]:
    """A remote A2A agent's card just fetched (`remote_a2a.fetch_card`), put on the agent for
    its save to write; returns the card's skills as the agent's expertise."""
    agent.a2a_card, agent.a2a_card_fetched_at = card, timezone.now()
    agent.expertise = remote_a2a.expertise_of(card)
    return agent.expertise


def card_checked(url: str) -> dict:
    """The card at `url`, fetched and checked; a URL the outbound rule refuses, or no card, is
    a ValidationError on `a2a_card_url`."""
    try:
        remote_a2a.validate_card_url(url)
        return remote_a2a.fetch_card(url)
    except ValidationError as exc:
        raise ValidationError({"a2a_card_url": exc.messages}) from exc
    except remote_a2a.CardRefused as exc:
        raise ValidationError({"a2a_card_url": str(exc)}) from exc


def agent_card_checked(agent: Agent, card: dict | None = None) -> None:
    """A door saving a remote A2A agent (an import): its card (`card_checked`, or fetched now)
    put on the agent for its save."""
    agent_take_card(agent, card if card is not None else card_checked(agent.a2a_card_url))


def agent_card_refresh(*, agent: Agent) -> Agent:
    """Fetch a remote A2A agent's card again and store it, its skills as expertise (CardRefused
    when it no longer is a card we can use: the stored one is kept). Fetched before the
    transaction: no connection is held while the remote answers."""
    card = remote_a2a.fetch_card(agent.a2a_card_url)
    agent_take_card(agent, card)
    with transaction.atomic():
        Agent.objects.filter(pk=agent.pk).update(
            a2a_card=agent.a2a_card,
            a2a_card_fetched_at=agent.a2a_card_fetched_at,
            expertise=agent.expertise,
            updated_at=timezone.now(),
        )
        record_changes(Agent.objects.filter(pk=agent.pk))
    return agent


@transaction.atomic
def agent_set_availability(*, agent: Agent, until: datetime | None) -> Agent:
    """Seed 001's `availability_until`, set by the agent itself: when it expects to be free
    (None: available indefinitely). The roster shows it; queue wait estimates use it."""
    Agent.objects.filter(pk=agent.pk).update(availability_until=until, updated_at=timezone.now())
    record_changes(Agent.objects.filter(pk=agent.pk))
    agent.availability_until = until
    return agent


def agent_open_work(*, agent: Agent) -> tuple[int, int]:
    """(tasks the agent holds, tasks queued for it): the work its deletion has to move on."""
    held = agent.held_tasks.filter(status__in=workload.HELD_STATUSES).count()
    queued = agent.queued_tasks.filter(status=workload.QUEUED_STATUS).count()
    return held, queued


@transaction.atomic
def agent_delete(*, caller: Caller, agent: Agent) -> list:
    """Delete an agent (a human's act); returns the tasks its deletion moved on.

    Its tasks are escalated first (`agent_leaving`); if any is left, nothing is deleted (409).
    """
    caller.require_human()
    drop_default_supervisor(agent)
    moved = [
        task
        for _, tasks in agent_leaving.send(sender=Agent, agent=agent, caller=caller)
        for task in tasks or []
    ]
    # Locked after the moves and their tasks (a task's row before an agent's, as every move
    # locks them), with its reports, whose senior the deletion clears, by pk as moves lock
    # agents: no move can give it work between this count and the deletion.
    locked = Agent.objects.filter(Q(pk=agent.pk) | Q(senior=agent)).order_by("pk")
    rows = locked.select_for_update().values_list("pk", "senior_id")
    reports = [pk for pk, senior_id in rows if senior_id == agent.pk and pk != agent.pk]
    held, queued = agent_open_work(agent=agent)
    if held or queued:
        raise Conflict(
            f"Cannot delete {agent.handle}: it still holds {held} task(s) and {queued} are "
            "queued for it; escalate, reassign or cancel them first.",
            "agent_has_work",
        )
    agent.delete()
    record_changes(Agent.objects.filter(pk__in=reports).order_by("pk"))
    return moved
