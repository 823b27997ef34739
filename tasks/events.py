"""The record of each move: one constructor per event kind (as saleor's `order/events.py`).

Each builds the audit row from the task and `before` (its `snapshot()`) and writes it through
`event_writer` in the caller's transaction: inbox item, webhook and wake-up included.
"""

from __future__ import annotations

from collections import Counter

from organization.models import Agent
from organization.sql import agent_named

from .event_writer import record, record_for
from .holds import budget_holds
from .models import (
    FINISHED_STATUSES,
    ActorKind,
    Decision,
    EventKind,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
)
from .rules import SYSTEM, Actor, Verdict, coordination_note, delegated_by, is_cross_team

# How much of a result or a comment an inbox message quotes (the rest is on the task).
EXCERPT_LENGTH = 200


def snapshot(task: Task) -> dict:
    """What the audit row keeps of the task, before and after a move."""
    return {
        "status": task.status,
        "assignee": task.assignee.handle if task.assignee else None,
        "queued_for": task.queued_for.handle if task.queued_for else None,
    }


def excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_LENGTH else text[: EXCERPT_LENGTH - 1] + "…"


# --- one constructor per event kind ------------------------------------------------------------


def task_created_event(*, task: Task, actor: Actor, assignee: Agent | None) -> TaskEvent:
    who = f" and assigned it to {assignee.handle}" if assignee else " (queued, unassigned)"
    message = f"{actor.label} created the task{who}."
    event = _event(task, EventKind.CREATED, actor, {}, recipient=assignee, message=message)
    return record(task, event)


def task_assigned_event(*, task: Task, actor: Actor, before: dict, to: Agent) -> TaskEvent:
    message = f"{actor.label} assigned the task to {to.handle}.{_held(to)}"
    return record(
        task, _event(task, EventKind.ASSIGNED, actor, before, recipient=to, message=message)
    )


def task_claimed_event(*, task: Task, actor: Actor, before: dict, to: Agent) -> TaskEvent:
    message = f"{to.handle} claimed the task."
    return record(
        task, _event(task, EventKind.CLAIMED, actor, before, recipient=to, message=message)
    )


def task_auto_assigned_event(*, task: Task, before: dict, to: Agent) -> TaskEvent:
    """The queue's refill: the system gives a queued task to the expert who has room again."""
    message = f"{to.handle} has room again: the queued task is assigned to them."
    event = _event(task, EventKind.AUTO_ASSIGNED, SYSTEM, before, recipient=to, message=message)
    return record(task, event)


def task_delegated_event(
    *, task: Task, actor: Actor, before: dict, to: Agent, **decision
) -> TaskEvent:
    """Seed 001's DELEGATE; `decision` holds the DELEGATION DECISION fields."""
    event = _event(
        task,
        EventKind.DELEGATED,
        actor,
        before,
        recipient=to,
        message=f"{actor.label} delegated the task to {to.handle}.{_held(to)}",
        decision=Decision.DELEGATE,
        primary_choice=to.handle,
        **decision,
        **_cross_team(actor, to),
    )
    return record(task, event)


def task_queued_event(
    *, task: Task, actor: Actor, before: dict, to: Agent, estimated_wait: int, **decision
) -> TaskEvent:
    """Seed 001's QUEUE; `decision` holds the DELEGATION DECISION fields and the Wait Time."""
    message = (
        f"{actor.label} queued the task for {to.handle} "
        f"(estimated wait {estimated_wait} s).{_held(to)}"
    )
    event = _event(
        task,
        EventKind.QUEUED,
        actor,
        before,
        recipient=to,
        message=message,
        decision=Decision.QUEUE,
        primary_choice=to.handle,
        **decision,
        **_cross_team(actor, to),
    )
    return record(task, event)


def escalation_event(
    *,
    task: Task,
    actor: Actor,
    before: dict,
    target: Agent | None,
    verdict: Verdict | None,
    stale: bool = False,
    **decision,
) -> TaskEvent:
    """The (unsaved) event of seed 001's ESCALATE, the move's and the stale sweep's alike.

    No `target`: escalated to humans; else given to the target or queued for it (`verdict`).
    """
    who = "The system" if stale else actor.label
    what = "the stale task" if stale else "the task"
    if target is None:
        why = "" if stale else ": no senior or supervisor available"
        message = f"{who} escalated {what} to humans{why}."
    elif verdict.has_room:
        message = f"{who} escalated {what} to {target.handle}."
    else:
        load = "" if stale else f" ({verdict.workload}/{verdict.capacity})"
        message = (
            f"{who} escalated {what} to {target.handle}, who is at capacity{load}: "
            "the task is queued for them."
        )
    choice = target.handle if target else ""
    return _event(
        task,
        EventKind.ESCALATED,
        actor,
        before,
        recipient=target,
        message=message,
        decision=Decision.ESCALATE,
        primary_choice=choice,
        **decision,
    )


def task_escalated_event(
    *,
    task: Task,
    actor: Actor,
    before: dict,
    target: Agent | None,
    verdict: Verdict | None,
    **decision,
) -> TaskEvent:
    event = escalation_event(
        task=task, actor=actor, before=before, target=target, verdict=verdict, **decision
    )
    # Queued for a senior at capacity: told, not asked to act (the refill that gives it the task
    # wakes it), as for any task queued for an expert.
    return record(task, event, wake=target is None or task.assignee_id == target.pk)


def task_status_changed_event(
    *, task: Task, actor: Actor, before: dict, note: str = ""
) -> TaskEvent:
    """A status move; a completed or failed task reaches its creator and delegator, result quoted.

    Its holder is told (not woken) of a move someone else made of the task it holds (rule 8).
    """
    message = f"{actor.label}: {before['status']} → {task.status}." + (f" {note}" if note else "")
    event = _event(task, EventKind.STATUS_CHANGED, actor, before, notes=note)
    holder = task.assignee  # `record_for` never tells the actor: the holder moving its own task
    if task.status not in (TaskStatus.COMPLETED, TaskStatus.FAILED):
        event.message = message
        if holder is None or actor.is_(holder):
            return record(task, event)
        return record_for(task, event, [holder])
    if task.result:
        message += f" Result: {excerpt(task.result)}"
    event.message = message
    return record_for(task, event, [holder, task.created_by_agent, *_delegator(task)])


def task_cancelled_event(
    *,
    task: Task,
    actor: Actor,
    before: dict,
    reason: str = "",
    with_parent: Task | None = None,
    waited_for: Agent | None = None,
) -> TaskEvent:
    """Cancelled (`with_parent`: with its parent); holder, awaited expert and creator are told."""
    message = f"{actor.label} cancelled the task."
    if with_parent is not None:
        message = f"{actor.label} cancelled the task with its parent task #{with_parent.pk}."
    message += f" {reason}" if reason else ""
    event = _event(task, EventKind.CANCELLED, actor, before, message=message, reasoning=reason)
    holder = task.assignee if before.get("assignee") else None
    return record_for(task, event, [holder, waited_for, task.created_by_agent])


def task_commented_event(*, task: Task, actor: Actor, comment: TaskComment) -> TaskEvent:
    """A comment reaches the holder (or awaited expert), creator and delegator, never its author.

    The expert a queued task only waits for is told but not woken: it does not hold the task yet.
    """
    holder = task.assignee or task.queued_for
    message = f"{actor.label} commented on the task: {excerpt(comment.body)}"
    event = _event(task, EventKind.COMMENT, actor, snapshot(task), message=message)
    told = [holder, task.created_by_agent, *_delegator(task)]
    return record_for(task, event, told, unwoken=_only_waited_for(task))


def subtasks_done_event(*, parent: Task, actor: Actor, last: Task, counts: Counter) -> TaskEvent:
    """The last open subtask of `parent` finished: its holder is told how they all ended."""
    total = sum(counts.values())
    ended = ", ".join(f"{counts[s]} {s}" for s in FINISHED_STATUSES if counts[s])
    message = (
        f"All {total} subtask(s) of the task are finished ({ended}); the last, "
        f'#{last.pk} "{last.title}", {last.status} by {actor.label}.'
    )
    event = _event(parent, EventKind.SUBTASKS_DONE, actor, snapshot(parent), message=message)
    return record_for(parent, event, [parent.assignee])


# --- what the constructors share ---------------------------------------------------------------


def _event(
    task: Task,
    kind: str,
    actor: Actor,
    before: dict,
    *,
    recipient: Agent | None = None,
    message: str = "",
    **decision,
) -> TaskEvent:
    """The audit row of a move, unsaved; `after` is the task as it is now."""
    # Ids, not instances: the sweep builds thousands of these, and each related set costs.
    return TaskEvent(
        organization_id=task.organization_id,
        task_id=task.pk,
        kind=kind,
        actor_kind=actor.kind,
        actor_agent_id=actor.agent.pk if actor.agent is not None else None,
        actor_user_id=actor.user.pk if actor.kind == ActorKind.USER and actor.user else None,
        actor_label=actor.label,
        recipient=recipient,
        before=before,
        after=snapshot(task),
        message=message,
        **decision,
    )


def _held(to: Agent) -> str:
    """The sentence an event adds when a budget holds its managed agent back (`tasks.holds`)."""
    why = budget_holds([to]).get(to.pk)
    return (
        f" {to.handle} is held for budget ({why}): the work waits until it has room." if why else ""
    )


def _cross_team(actor: Actor, to: Agent) -> dict:
    """The event fields of an agent's routing: whether it crosses teams, and the note if so."""
    if not actor.is_agent or not is_cross_team(actor.agent, to):
        return {"cross_team": False}
    return {"cross_team": True, "coordination_note": coordination_note(actor.agent, to)}


def _only_waited_for(task: Task) -> Agent | None:
    """The expert a queued task waits for, unless it also passed the task on (then it is woken)."""
    expert = task.queued_for if task.assignee is None else None
    if expert is None or task.created_by_agent_id == expert.pk:
        return None
    passed_on = list(task.delegation_chain)[:-1]
    return None if expert.handle in passed_on else expert


def _delegator(task: Task) -> list[Agent]:
    """Who passed the task to its holder (or up to the humans it waits for); [] if nobody.

    One query when somebody did.
    """
    holder = task.assignee or task.queued_for
    chain = list(task.delegation_chain)
    if not chain:
        return []
    if holder is None:
        handle = chain[-1]
    else:
        handle = delegated_by(chain, holder.handle)
    if handle is None or (holder is not None and handle == holder.handle):
        return []
    creator = task.created_by_agent
    if creator is not None and creator.handle == handle:
        return [creator]
    return agent_named(organization_id=task.organization_id, handle=handle)


def decision_event(*, task: Task, actor: Actor, message: str, tell=None) -> TaskEvent:
    """A human decision on the task changed state (docs/decisions.md): the audit row; `tell`,
    the agent that asked, gets an inbox item of kind `decision`, its webhook and a wake-up."""
    event = _event(task, EventKind.DECISION, actor, snapshot(task), recipient=tell, message=message)
    return record(task, event)
