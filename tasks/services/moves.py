"""The moves: create, assign or claim, delegate, queue, escalate, change status, cancel.

Each runs in one transaction: lock the task (then the agents, in pk order), check the rules,
write the task, record the event, refill the queue of an expert the move freed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from django.utils import timezone

from infrastructure.atomic import atomic
from infrastructure.errors import Conflict, Forbidden, Invalid
from organization.models import Agent, Organization

from .. import events, rules
from ..events import snapshot
from ..models import FINISHED_STATUSES, HELD_STATUSES, ActorKind, Task, TaskStatus, Urgency
from ..rules import Actor, DelegationDecision, Move
from ..selectors import VisibleTask, estimated_wait_for_new
from .changes import apply_escalation, change_status, give, wait_for
from .checks import (
    RESULT_STATUSES,
    TRANSITIONS,
    check_move,
    ensure_may_move,
    ensure_open,
    invalid_transition,
    pass_on,
)
from .decisions import escalation_decision
from .gate import create_arguments, gated, move_arguments
from .locks import lock_target, locked, locked_with_parent, rule_of
from .queue import fill_from_queue, refill_if_dropped
from .subtasks import lock_open_subtasks, open_subtasks, tell_parent


@gated("create_task", create_arguments)
@atomic
def task_create(
    *,
    org: Organization,
    actor: Actor,
    title: str,
    description: str = "",
    required_expertise: str = "",
    urgency: str = Urgency.NORMAL,
    deadline: datetime | None = None,
    assignee: Agent | None = None,
    parent: Task | VisibleTask | None = None,
) -> Task:
    """Create a task, assigned to `assignee` (rules checked) or queued unassigned.

    With `parent`, a subtask of it (`rules.check_parent`: an agent adds them to a task it holds).
    """
    now = timezone.now()
    if parent is not None:
        # Locked before the assignee and kept until commit: a parent being finished or
        # cancelled meanwhile cannot miss this subtask.
        parent = locked(parent)
        rules.check_parent(org=org, actor=actor, parent=parent)
    task = Task(
        organization=org,
        title=title,
        description=description,
        required_expertise=required_expertise,
        urgency=urgency,
        deadline=deadline,
        parent=parent,
        created_by_agent=actor.agent,
        created_by_user=actor.user if actor.kind == ActorKind.USER else None,
        delegation_chain=[actor.agent.handle] if actor.is_agent else [],
    )
    if assignee is not None:
        move = Move.CLAIM if actor.is_(assignee) else Move.CREATE
        rules.check_assignment(org=org, actor=actor, target=assignee, move=move, task=task)
        give(task, assignee, now)
    else:
        rules.check_policies(org=org, actor=actor, move=Move.CREATE, target=None, task=task)
        task.status = TaskStatus.QUEUED
        task.queued_at = now
        task.queued_by = actor.agent
    task.save_new()
    events.task_created_event(task=task, actor=actor, assignee=assignee)
    return task


@gated("assign_task", move_arguments)
@atomic
def task_assign(*, task: Task | VisibleTask, actor: Actor, to: Agent | str | None = None) -> Task:
    """Assign to `to` (an agent, or its handle), or (no `to`) the calling agent claims the task."""
    task = locked(task)
    previous = task.assignee
    claim = to is None
    if claim and actor.agent is None:
        raise Forbidden("agent_id is required: only an agent can claim a task.", "agent_required")
    to = lock_target(task, actor.agent if claim else to)
    claim = claim or actor.is_(to)
    ensure_open(task, TaskStatus.ASSIGNED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    if claim and actor.is_agent:
        # A task queued for another expert is taken from that queue only by whoever may move
        # it anyway (its creator, or who queued it), never by a delegator.
        queued_elsewhere = task.queued_for_id not in (None, to.pk) and to.pk not in (
            task.created_by_agent_id,
            task.queued_by_id,
        )
        if task.assignee_id is not None or queued_elsewhere:
            raise invalid_transition(
                task.status,
                TaskStatus.ASSIGNED,
                "only an unassigned task, one queued for you, or one you created or queued "
                "can be claimed.",
            )
    else:
        ensure_may_move(task, actor, TaskStatus.ASSIGNED)
        pass_on(task, actor)
    check_move(task, actor, to, Move.CLAIM if claim else Move.ASSIGN)
    before = snapshot(task)
    give(task, to, timezone.now())
    task.save_move()
    record = events.task_claimed_event if claim else events.task_assigned_event
    record(task=task, actor=actor, before=before, to=to)
    refill_if_dropped(previous, task)
    return task


@gated("delegate_task", move_arguments)
@atomic
def task_delegate(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's DELEGATE: an agent passes the task on, storing the DELEGATION DECISION."""
    task = locked(task)
    previous = task.assignee
    to = lock_target(task, to)
    # After the reads, so that an unknown task or agent answers 404 first.
    if not actor.is_agent:
        raise Forbidden(
            "Only an agent delegates (it acts as one agent); a human reassigns with assign.",
            "agent_required",
        )
    ensure_open(task, TaskStatus.ASSIGNED)
    ensure_may_move(task, actor, TaskStatus.ASSIGNED)
    pass_on(task, actor)
    check_move(task, actor, to, Move.DELEGATE)
    before = snapshot(task)
    give(task, to, timezone.now())
    task.save_move()
    events.task_delegated_event(task=task, actor=actor, before=before, to=to, **decision)
    refill_if_dropped(previous, task)
    return task


@gated("queue_task", move_arguments)
@atomic
def task_queue(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    wait_time_seconds: int | None = None,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's QUEUE: the task waits for a busy (full, not offline) expert.

    The DELEGATION DECISION is stored; `wait_time_seconds` is the caller's Wait Time, else ours.
    """
    task = locked(task)
    previous = task.assignee
    to = lock_target(task, to)
    ensure_open(task, TaskStatus.QUEUED)
    if task.status == TaskStatus.QUEUED and task.queued_for_id == to.pk:
        raise Conflict(f"The task is already queued for {to.handle}.", "already_queued")
    ensure_may_move(task, actor, TaskStatus.QUEUED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    pass_on(task, actor)
    check_move(task, actor, to, Move.QUEUE)
    wait = estimated_wait_for_new(agent=to, urgency_rank=task.urgency_rank)
    before = snapshot(task)
    wait_for(task, to, actor.agent or task.queued_by, timezone.now())
    task.save_move()
    events.task_queued_event(
        task=task,
        actor=actor,
        before=before,
        to=to,
        estimated_wait=wait,
        wait_time_seconds=wait if wait_time_seconds is None else wait_time_seconds,
        **decision,
    )
    refill_if_dropped(previous, task)
    return task


@atomic
def task_escalate(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    reason: str = "",
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's ESCALATE: to the senior, else the default supervisor, else humans.

    The DELEGATION DECISION is stored; `reason` is the reasoning when `reasoning` is not given.
    """
    task = locked(task)
    ensure_open(task, TaskStatus.ESCALATED)
    if task.status == TaskStatus.ESCALATED:
        raise invalid_transition(task.status, TaskStatus.ESCALATED, "it already waits for humans.")
    ensure_may_move(task, actor, TaskStatus.ESCALATED)
    pass_on(task, actor)
    source = actor.agent if actor.is_agent else rules.escalation_source(task)
    rule, previous, target, verdict = rule_of(task), task.assignee, None, None
    up = {
        "rule": rule,
        "source": source,
        "queued_for_id": task.queued_for_id,
        "by_roles": rules.roles_apply(actor, task),
    }
    candidates = rules.escalation_candidates(**up)
    if candidates:
        # All locked with the holder before one is chosen: a senior paused meanwhile is passed over.
        rules.lock_agents([*candidates, previous])
        target = rules.escalation_target(**up)
    if target is not None:
        verdict = check_move(task, actor, target, Move.ESCALATE)
    before = snapshot(task)
    apply_escalation(task, target=target, verdict=verdict, queued_by=source, now=timezone.now())
    task.save_move()
    decision = {**decision, "reasoning": decision.get("reasoning") or reason}
    events.task_escalated_event(
        task=task, actor=actor, before=before, target=target, verdict=verdict, **decision
    )
    if target is None:
        escalation_decision(task=task, actor=actor, source=source)
    # With no candidate to lock, the holder's row was not locked yet: fill_from_queue locks it.
    refill_if_dropped(previous, task, locked=bool(candidates))
    return task


@atomic
def task_set_status(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    status: str,
    note: str = "",
    result: str = "",
    result_data: dict | None = None,
) -> Task:
    """The assignee moves its task: assigned → in_progress → blocked ⇄ in_progress → completed | failed.

    Completing or failing stores the result and tells the creator and the delegator; a parent is
    told when its last open subtask finishes.
    """
    finishing = status in FINISHED_STATUSES
    task, parent = locked_with_parent(task, with_parent=finishing)
    if actor.is_agent and task.assignee_id != actor.agent.pk:
        raise invalid_transition(
            task.status, status, "only the task's assignee may change its status."
        )
    if status not in TRANSITIONS.get(task.status, set()):
        raise invalid_transition(task.status, status)
    if status in RESULT_STATUSES:
        task.result, task.result_data = result, result_data
    elif result or result_data is not None:
        raise Invalid(
            f"result and result_data come with completed or failed, not with {status}.", "invalid"
        )
    before, freed = change_status(task, status)
    events.task_status_changed_event(task=task, actor=actor, before=before, note=note)
    if finishing:
        tell_parent(task, parent, actor)
    if freed is not None:
        fill_from_queue(freed, locked=True)
    return task


@atomic
def task_cancel(
    *, task: Task | VisibleTask, actor: Actor, reason: str = "", cancel_subtasks: bool = False
) -> Task:
    """Cancel: a human, or the agent that created the task.

    Open subtasks (any depth) go with it, each with its own event, only with `cancel_subtasks`;
    without it → 409 `open_subtasks`.
    """
    task, parent = locked_with_parent(task)
    ensure_open(task, TaskStatus.CANCELLED)
    if actor.is_agent and task.created_by_agent_id != actor.agent.pk:
        raise invalid_transition(
            task.status, TaskStatus.CANCELLED, "only the task's creator or a human may cancel it."
        )
    subtasks = []
    if cancel_subtasks:
        subtasks = lock_open_subtasks(task)
    elif count := len(open_subtasks(task)):
        raise Conflict(
            f"The task has {count} open subtask(s): cancel them first, or cancel it with "
            "cancel_subtasks: true to cancel them with it.",
            "open_subtasks",
        )
    # Every holder freed, locked at once in pk order (as every move locks agents).
    everything = [task, *subtasks]
    rules.lock_agents(t.assignee for t in everything if t.status in HELD_STATUSES)
    freed = []
    for one in everything:
        waited_for = one.queued_for
        before, holder = change_status(one, TaskStatus.CANCELLED, holder_locked=True)
        events.task_cancelled_event(
            task=one,
            actor=actor,
            before=before,
            reason=reason,
            with_parent=None if one is task else task,
            waited_for=waited_for,
        )
        if holder is not None and holder not in freed:
            freed.append(holder)
    # The subtasks' parents are cancelled with them (or were finished): only the task's own
    # parent may have seen its last open subtask finish.
    tell_parent(task, parent, actor)
    for holder in freed:
        fill_from_queue(holder, locked=True)
    return task
