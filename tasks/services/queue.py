"""The queue: an expert with room again is given its most urgent, oldest queued tasks."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from infrastructure.atomic import atomic
from organization.models import Agent
from organization.selectors import workloads_of
from organization.workload import workload_subquery_of

from .. import events, rules, sql
from ..events import snapshot
from ..models import Task, TaskStatus
from ..rules import SYSTEM, Move
from ..sql import NO_KEY
from .changes import give
from .locks import rule_of


def _next_queued(agent: Agent, workload: int | None) -> Task | None:
    """The agent's most urgent, oldest queued task not locked by another move, if it has room.

    Without a known `workload` the same statement counts it, as `workload_before` on the task.
    """
    rows = (
        Task.objects.select_for_update(skip_locked=True, of=("self",), **NO_KEY)
        .select_related("organization__team_rule", "queued_for")
        .filter(queued_for=agent, status=TaskStatus.QUEUED)
        .order_by("-urgency_rank", "created_at", "pk")
    )
    if workload is None:
        rows = rows.annotate(workload_before=workload_subquery_of(agent)).filter(
            workload_before__lt=agent.workload_capacity
        )
    elif workload >= agent.workload_capacity:
        return None
    return next(iter(rows[:1]), None)


def fill_from_queue(agent: Agent, *, locked: bool = False) -> list[Task]:
    """Give `agent` its queued tasks while it has room (`locked`: its row is locked already).

    Also run when an agent is resumed or given more capacity (`agent_gained_room`, apps.py).
    """
    if not locked:
        rules.lock_agents([agent])
    # Read from the locked row: an agent paused meanwhile receives nothing.
    if agent.is_paused:
        return []
    # Read under the agent's lock, which queueing for it takes too: nothing queued now stays so.
    waiting = sql.queued_count(agent.pk)
    if not waiting:
        return []
    workload = None
    given = []
    while (task := _next_queued(agent, workload)) is not None:
        if workload is None:
            workload = task.workload_before
        rules.check_assignment(
            org=task.organization,
            actor=SYSTEM,
            target=agent,
            move=Move.AUTO,
            task=task,
            rule=rule_of(task),
            workload=workload,
        )
        before = snapshot(task)
        give(task, agent, timezone.now())
        task.save_move()
        events.task_auto_assigned_event(task=task, before=before, to=agent)
        workload += 1
        given.append(task)
    if len(given) < waiting:
        if workload is None:
            workload = workloads_of([agent.pk])[agent.pk]
        if workload < agent.workload_capacity:
            # Room is left and tasks still wait: rows another move holds were skipped, and that
            # move may leave its task queued here; nothing else would refill this agent.
            transaction.on_commit(lambda: _refill_when_unlocked(agent), robust=True)
    return given


@atomic
def _refill_when_unlocked(agent: Agent) -> list[Task]:
    """`fill_from_queue` again after the commit, once the moves that held its rows are done.

    It waits for those task rows first, holding no agent's lock, so it cannot deadlock.
    """
    list(
        Task.objects.select_for_update(of=("self",), **NO_KEY)
        .filter(queued_for=agent, status=TaskStatus.QUEUED)
        .order_by("pk")
        .values_list("pk")
    )
    return fill_from_queue(agent)


def refill_if_dropped(previous: Agent | None, task: Task, *, locked: bool = True) -> None:
    """Refill the queue of the holder the move took `task` from."""
    if previous is not None and task.assignee_id != previous.pk:
        fill_from_queue(previous, locked=locked)
