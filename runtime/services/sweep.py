"""Send again what a worker lost: stale runs, runs never delivered, wake-ups never made.

A second delivery of a live run backs off at its lease, so sending again is always safe.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, Max, Min, OuterRef, Q
from django.utils import timezone

from costs.budgets import blocking_budget
from infrastructure import outbox
from organization.models import Agent, AgentRuntime
from tasks.models import HELD_STATUSES, InboxItem, Task
from tasks.signals import WAKING_KINDS

from ..models import Run, RunStatus, RunTrigger
from .bounds import COMMENT
from .dispatch import dispatch
from .wake import run_wake

log = logging.getLogger(__name__)

# An agent whose history shows it managed throughout: every item it received asked for a run.
ALWAYS_MANAGED = datetime.min.replace(tzinfo=UTC)


def sweep_runs() -> dict:
    """Send again the runs a worker lost — running with a heartbeat older than the lease, or
    queued and not sent for as long while nothing waits in the broker — and the wake-ups that
    were lost (`_never_woken`)."""
    stale = timezone.now() - timedelta(seconds=settings.RUNTIME_LEASE_SECONDS)
    lost = list(
        Run.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=stale).values_list(
            "pk", "agent_id"
        )
    )
    # A queued run whose message waits in the broker behind busy threads is not lost: only
    # once nothing waits there is a run still queued after a lease sent again.
    unsent = [
        (run.pk, run.agent_id)
        for run in Run.objects.filter(
            status=RunStatus.QUEUED, dispatched_at__lt=stale, agent__is_paused=False
        ).select_related("agent")
        # One its claim held for the budget waits for room (wake_after_budget sends it then),
        # as a paused agent's waits for its resumption: not sent again every lease for a month.
        if blocking_budget(run.agent) is None
    ]
    if unsent and outbox.waiting_in_broker() != 0:
        unsent = []
    for pk, agent_id in lost + unsent:
        with transaction.atomic():
            dispatch(Run(pk=pk, agent_id=agent_id))
    lost, unsent = [pk for pk, _ in lost], [pk for pk, _ in unsent]
    if lost or unsent:
        log.info("runtime sweep sent again: %s running (stale), %s queued", lost, unsent)
    woken = []
    for agent_id, kind, task_id in _never_woken(stale):
        # Sent again as it was lost: the same trigger, for the same task.
        run_wake(agent=Agent(pk=agent_id), trigger=kind, task=Task(pk=task_id))
        if agent_id not in woken:
            woken.append(agent_id)
    if woken:
        log.warning("runtime sweep woke agents whose wake-up was lost: %s", woken)
    return {"resent": lost + unsent, "woken": woken}


def _never_woken(stale) -> list[tuple[int, str, int]]:
    """(agent, kind, task) of each wake-up lost after its move's commit: an inbox item older
    than `stale`, received while its agent was managed, about a task it still holds, with no
    trigger since (docs/runtime.md lists what is and is not sent again)."""
    reached = RunTrigger.objects.filter(
        agent_id=OuterRef("agent_id"),
        task_id=OuterRef("task_id"),
        created_at__gte=OuterRef("created_at"),
    )
    items = (
        InboxItem.objects.filter(
            kind__in=WAKING_KINDS,
            created_at__lt=stale,
            agent__runtime=AgentRuntime.MANAGED,
            agent__is_paused=False,
            task__status__in=HELD_STATUSES,
            task__assignee_id=F("agent_id"),
        )
        .exclude(Exists(reached))
        # A managed agent's comment is not replayed: its author is at work on the task, and
        # replaying agents' conversations would let them talk past the comment bound.
        .exclude(kind=COMMENT, event__actor_agent__runtime=AgentRuntime.MANAGED)
        .order_by("agent_id", "task_id", "-created_at")
        .values_list("agent_id", "kind", "task_id", "created_at")
    )
    latest = {}
    for agent_id, kind, task_id, created_at in items:
        latest.setdefault((agent_id, task_id), (kind, created_at))
    if not latest:
        return []  # the sweep's usual answer: no history read
    since = _managed_since({agent_id for agent_id, _ in latest})
    return [
        (agent_id, kind, task_id)
        for (agent_id, task_id), (kind, created_at) in latest.items()
        if agent_id in since and created_at >= since[agent_id]
    ]


def _managed_since(agent_ids: set[int]) -> dict[int, datetime]:
    """When each agent last became managed, by its history: ALWAYS_MANAGED when no row shows it
    external; left out when its last row shows it external (its switch went unrecorded)."""
    history = Agent.history.filter(id__in=agent_ids)
    last_external = dict(
        history.exclude(runtime=AgentRuntime.MANAGED)
        .values("id")
        .annotate(at=Max("history_date"))
        .values_list("id", "at")
    )
    since = {agent_id: ALWAYS_MANAGED for agent_id in agent_ids if agent_id not in last_external}
    if last_external:
        after_external = Q()
        for agent_id, at in last_external.items():
            after_external |= Q(id=agent_id, history_date__gt=at)
        since.update(
            history.filter(after_external, runtime=AgentRuntime.MANAGED)
            .values("id")
            .annotate(at=Min("history_date"))
            .values_list("id", "at")
        )
    return since
