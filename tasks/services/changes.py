"""The state changes of a move, made on the locked task in memory (`change_status` saves)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from organization.models import Agent

from .. import rules
from ..events import snapshot
from ..models import FINISHED_STATUSES, HELD_STATUSES, Task, TaskStatus


def give(task: Task, target: Agent, now: datetime) -> None:
    task.status = TaskStatus.ASSIGNED
    task.assignee = target
    task.queued_for = None
    task.queued_by = None
    task.queued_at = None
    task.assigned_at = now
    task.delegation_chain = rules.chain_after(list(task.delegation_chain), target.handle)


def wait_for(task: Task, target: Agent, by: Agent | None, now: datetime) -> None:
    task.status = TaskStatus.QUEUED
    task.assignee = None
    task.queued_for = target
    task.queued_by = by
    task.queued_at = now


def apply_escalation(
    task: Task,
    *,
    target: Agent | None,
    verdict: rules.Verdict | None,
    queued_by: Agent | None,
    now: datetime,
) -> None:
    """Seed 001's ESCALATE on the task, for the move and the stale sweep alike.

    No target: the task waits for humans, in no queue. A target with room gets it; a full one
    has it queued for them, by `queued_by`.
    """
    if target is None:
        task.status = TaskStatus.ESCALATED
        task.assignee = None
        task.queued_for = None
        task.queued_by = None
        task.queued_at = None
    elif verdict.has_room:
        give(task, target, now)
    else:
        wait_for(task, target, queued_by, now)


def change_status(
    task: Task, status: str, *, holder_locked: bool = False
) -> tuple[dict, Agent | None]:
    """Move the (locked, checked) task to `status`; (its snapshot before, the holder it freed).

    The holder's row is locked only when the move frees it (its workload changes).
    """
    holder = task.assignee if task.status in HELD_STATUSES else None
    if holder is not None and not holder_locked and status in FINISHED_STATUSES:
        rules.lock_agents([holder])
    before = snapshot(task)
    task.status = status
    if status in FINISHED_STATUSES:
        task.finished_at = timezone.now()
        task.queued_for = None
    task.save_move()
    return before, holder if status in FINISHED_STATUSES else None
