"""Writes of the tasks engine: the moves. Every change of assignee or status goes through one.

Each move runs in one transaction: it locks the task row first, then the agents' rows (in pk
order), checks the rules through `rules.check_assignment`, writes the task, records the move
through `events` (audit row, the receiving agent's inbox item and webhook delivery), and
refills the queue of an expert who dropped below capacity — all or nothing. The stale sweep
(`sweep.py`) escalates in bulk with the same rules, state changes and events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from django.db import transaction
from django.utils import timezone

from organization.errors import Conflict, Forbidden, NotFound
from organization.models import Agent, Organization, TeamRule
from organization.workload import workload_subquery_of

from . import events, rules
from .events import snapshot
from .models import (
    FINISHED_STATUSES,
    HELD_STATUSES,
    ActorKind,
    InboxItem,
    Task,
    TaskStatus,
    Urgency,
)
from .rules import SYSTEM, Actor, DelegationDecision, Move
from .selectors import VisibleTask, estimated_wait_for_new

# The status an assignee may move its task to (issue 3 §1).
TRANSITIONS = {
    TaskStatus.ASSIGNED: {TaskStatus.IN_PROGRESS},
    TaskStatus.IN_PROGRESS: {TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.FAILED},
    TaskStatus.BLOCKED: {TaskStatus.IN_PROGRESS, TaskStatus.FAILED},
}


# --- checks --------------------------------------------------------------------------------


def invalid_transition(current: str, wanted: str, why: str = "") -> Conflict:
    message = f"Cannot transition from {current} to {wanted}"
    return Conflict(f"{message}: {why}" if why else f"{message}.", "invalid_transition")


# What a move reads with its task: the agents it names, and the organization's team rule.
LOCKED_WITH = ("assignee", "queued_for", "queued_by", "created_by_agent", "organization__team_rule")


def _locked(task: Task | VisibleTask) -> Task:
    """The task's row, locked first of all a move's locks: the one read of the task in a move.

    A `VisibleTask` (REST) is read through the caller's view of the tasks, so this read is the
    visibility check too: 404 when the caller may not see it.
    """
    rows = task.rows if isinstance(task, VisibleTask) else Task.objects.filter(pk=task.pk)
    rows = rows.select_for_update(of=("self",)).select_related(*LOCKED_WITH).order_by()
    found = next(iter(rows[:1]), None)
    if found is None:
        if isinstance(task, VisibleTask):
            raise task.missing()
        raise NotFound(f"Task not found: {task.pk}", "task_not_found")
    return found


def _rule_of(task: Task) -> TeamRule:
    """The team rule read with the locked task (`_locked`); the defaults when none was set."""
    try:
        return task.organization.team_rule
    except TeamRule.DoesNotExist:
        return TeamRule(organization=task.organization)


def _lock_agents(task: Task, target: Agent | str) -> Agent:
    """Lock the target's and the current holder's rows (after the task's, in pk order).

    A handle is looked up in the task's organization by the same statement (404 if absent), so a
    move that names its target costs no read of its own.
    """
    holder = [task.assignee_id] if task.assignee_id else []
    if isinstance(target, Agent):
        rules.lock_agents([target.pk, *holder])
        return target
    found = rules.lock_agent_named(org=task.organization, handle=target, with_ids=holder)
    if found is None:
        raise NotFound(f"Agent not found: {target}", "agent_not_found")
    return found


def _ensure_open(task: Task, wanted: str) -> None:
    if task.status in FINISHED_STATUSES:
        raise invalid_transition(task.status, wanted, f"the task is {task.status}.")


def _ensure_may_move(task: Task, actor: Actor, wanted: str) -> None:
    """An agent moves only a task it holds, or an unheld one it created or waits for it."""
    if not actor.is_agent:
        return
    if task.assignee_id is not None:
        if task.assignee_id == actor.agent.pk:
            return
        raise invalid_transition(task.status, wanted, "only the task's assignee may move it.")
    if actor.agent.pk in (task.created_by_agent_id, task.queued_for_id, task.queued_by_id):
        return
    raise invalid_transition(task.status, wanted, "you neither hold nor created this task.")


def _check_move(task: Task, actor: Actor, to: Agent, move: str) -> rules.Verdict:
    """Run the rules for `move`; the target's row is locked already (`_lock_agents`)."""
    return rules.check_assignment(
        org=task.organization, actor=actor, target=to, move=move, task=task,
        rule=_rule_of(task), locked=True,
    )  # fmt: skip


# --- state changes (in memory; the caller saves) --------------------------------------------


def _give(task: Task, target: Agent, now: datetime) -> None:
    task.status = TaskStatus.ASSIGNED
    task.assignee = target
    task.queued_for = None
    task.queued_by = None
    task.queued_at = None
    task.assigned_at = now
    task.delegation_chain = rules.chain_after(list(task.delegation_chain), target.handle)


def _wait_for(task: Task, target: Agent, by: Agent | None, now: datetime) -> None:
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

    No target (`rules.escalation_target`): the task waits for humans. A target with room
    (`verdict`) gets it; a full one has it queued for them, queued by `queued_by`.
    """
    if target is None:
        task.status = TaskStatus.ESCALATED
        task.assignee = None
        task.queued_for = None
        task.queued_at = None
    elif verdict.has_room:
        _give(task, target, now)
    else:
        _wait_for(task, target, queued_by, now)


# --- the queue ---------------------------------------------------------------------------------


def _next_queued(agent: Agent, workload: int | None) -> Task | None:
    """The agent's most urgent, oldest queued task (skipping rows another move holds), if it has
    room. Without a known `workload` the room is counted by the same statement (the agent's row
    is locked, so the count is current), and returned on the task as `workload_before`."""
    rows = (
        Task.objects.select_for_update(skip_locked=True, of=("self",))
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
    """Give `agent` its most urgent, oldest queued tasks while it has room (agent row locked;
    `locked` when the caller holds the lock already).

    Also run when an agent is resumed or given more capacity (organization's `agent_gained_room`
    signal, connected in apps.py).
    """
    if agent.is_paused:
        return []
    if not locked:
        rules.lock_agents([agent.pk])
    workload = None
    given = []
    while (task := _next_queued(agent, workload)) is not None:
        if workload is None:
            workload = task.workload_before
        rules.check_assignment(
            org=task.organization, actor=SYSTEM, target=agent, move=Move.AUTO, task=task,
            rule=_rule_of(task), workload=workload,
        )  # fmt: skip
        before = snapshot(task)
        _give(task, agent, timezone.now())
        task.save()
        events.task_auto_assigned_event(task=task, before=before, to=agent)
        workload += 1
        given.append(task)
    return given


def _refill_if_dropped(previous: Agent | None, task: Task, *, locked: bool = True) -> None:
    if previous is not None and task.assignee_id != previous.pk:
        fill_from_queue(previous, locked=locked)


# --- create and move -----------------------------------------------------------------------


@transaction.atomic
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
) -> Task:
    """Create a task, assigned to `assignee` (rules checked) or queued unassigned."""
    now = timezone.now()
    task = Task(
        organization=org,
        title=title,
        description=description,
        required_expertise=required_expertise,
        urgency=urgency,
        deadline=deadline,
        created_by_agent=actor.agent,
        created_by_user=actor.user if actor.kind == ActorKind.USER else None,
        delegation_chain=[actor.agent.handle] if actor.is_agent else [],
    )
    if assignee is not None:
        move = Move.CLAIM if actor.is_(assignee) else Move.CREATE
        rules.check_assignment(org=org, actor=actor, target=assignee, move=move, task=task)
        _give(task, assignee, now)
    else:
        task.status = TaskStatus.QUEUED
        task.queued_at = now
        task.queued_by = actor.agent
    task.save()
    events.task_created_event(task=task, actor=actor, assignee=assignee)
    return task


@transaction.atomic
def task_assign(*, task: Task | VisibleTask, actor: Actor, to: Agent | str | None = None) -> Task:
    """Assign to `to` (an agent, or its handle), or (no `to`) the calling agent claims the task."""
    task = _locked(task)
    previous = task.assignee
    claim = to is None
    if claim and actor.agent is None:
        raise Forbidden("agent_id is required: only an agent can claim a task.", "agent_required")
    to = _lock_agents(task, actor.agent if claim else to)
    claim = claim or actor.is_(to)
    _ensure_open(task, TaskStatus.ASSIGNED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    if claim and actor.is_agent:
        if task.assignee_id is not None or task.queued_for_id not in (None, to.pk):
            raise invalid_transition(
                task.status,
                TaskStatus.ASSIGNED,
                "only an unassigned task, or one queued for you, can be claimed.",
            )
    else:
        _ensure_may_move(task, actor, TaskStatus.ASSIGNED)
    _check_move(task, actor, to, Move.CLAIM if claim else Move.ASSIGN)
    before = snapshot(task)
    _give(task, to, timezone.now())
    task.save()
    record = events.task_claimed_event if claim else events.task_assigned_event
    record(task=task, actor=actor, before=before, to=to)
    _refill_if_dropped(previous, task)
    return task


@transaction.atomic
def task_delegate(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's DELEGATE: an agent passes the task on (to an agent, or its handle), storing
    the DELEGATION DECISION."""
    task = _locked(task)
    previous = task.assignee
    to = _lock_agents(task, to)
    # After the reads, so that an unknown task or agent answers 404 first, as it always has.
    if not actor.is_agent:
        raise Forbidden(
            "Only an agent delegates (it acts as one agent); a human reassigns with assign.",
            "agent_required",
        )
    _ensure_open(task, TaskStatus.ASSIGNED)
    _ensure_may_move(task, actor, TaskStatus.ASSIGNED)
    _check_move(task, actor, to, Move.DELEGATE)
    before = snapshot(task)
    _give(task, to, timezone.now())
    task.save()
    events.task_delegated_event(task=task, actor=actor, before=before, to=to, **decision)
    _refill_if_dropped(previous, task)
    return task


@transaction.atomic
def task_queue(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    wait_time_seconds: int | None = None,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's QUEUE: the task waits for a busy (full, not offline) expert (an agent, or its
    handle).

    The DELEGATION DECISION is stored; `wait_time_seconds` is the caller's Wait Time, else ours.
    """
    task = _locked(task)
    previous = task.assignee
    to = _lock_agents(task, to)
    _ensure_open(task, TaskStatus.QUEUED)
    if task.status == TaskStatus.QUEUED and task.queued_for_id == to.pk:
        raise Conflict(f"The task is already queued for {to.handle}.", "already_queued")
    _ensure_may_move(task, actor, TaskStatus.QUEUED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    _check_move(task, actor, to, Move.QUEUE)
    wait = estimated_wait_for_new(agent=to, urgency_rank=task.urgency_rank)
    before = snapshot(task)
    _wait_for(task, to, actor.agent or task.queued_by, timezone.now())
    task.save()
    events.task_queued_event(
        task=task, actor=actor, before=before, to=to, estimated_wait=wait,
        wait_time_seconds=wait if wait_time_seconds is None else wait_time_seconds, **decision,
    )  # fmt: skip
    _refill_if_dropped(previous, task)
    return task


@transaction.atomic
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
    task = _locked(task)
    _ensure_open(task, TaskStatus.ESCALATED)
    if task.status == TaskStatus.ESCALATED:
        raise invalid_transition(task.status, TaskStatus.ESCALATED, "it already waits for humans.")
    _ensure_may_move(task, actor, TaskStatus.ESCALATED)
    source = actor.agent if actor.is_agent else rules.escalation_source(task)
    target = rules.escalation_target(
        rule=_rule_of(task), source=source, queued_for_id=task.queued_for_id
    )
    previous, verdict = task.assignee, None
    if target is not None:
        _lock_agents(task, target)
        verdict = _check_move(task, actor, target, Move.ESCALATE)
    before = snapshot(task)
    apply_escalation(task, target=target, verdict=verdict, queued_by=source, now=timezone.now())
    task.save()
    events.task_escalated_event(
        task=task, actor=actor, before=before, target=target, verdict=verdict,
        **{**decision, "reasoning": decision.get("reasoning") or reason},
    )  # fmt: skip
    # Escalated to humans, the holder's row was not locked yet: fill_from_queue locks it.
    _refill_if_dropped(previous, task, locked=target is not None)
    return task


def _change_status(task: Task, status: str) -> tuple[dict, Agent | None]:
    """Move the (locked, checked) task to `status`; (its snapshot before, the holder it freed)."""
    holder = task.assignee if task.status in HELD_STATUSES else None
    if holder is not None:
        rules.lock_agents([holder.pk])
    before = snapshot(task)
    task.status = status
    if status in FINISHED_STATUSES:
        task.finished_at = timezone.now()
        task.queued_for = None
    task.save()
    return before, holder if status in FINISHED_STATUSES else None


@transaction.atomic
def task_set_status(*, task: Task | VisibleTask, actor: Actor, status: str, note: str = "") -> Task:
    """The assignee moves its task: assigned → in_progress → blocked ⇄ in_progress → completed | failed."""
    task = _locked(task)
    if actor.is_agent and task.assignee_id != actor.agent.pk:
        raise invalid_transition(
            task.status, status, "only the task's assignee may change its status."
        )
    if status not in TRANSITIONS.get(task.status, set()):
        raise invalid_transition(task.status, status)
    before, freed = _change_status(task, status)
    events.task_status_changed_event(task=task, actor=actor, before=before, note=note)
    if freed is not None:
        fill_from_queue(freed, locked=True)
    return task


@transaction.atomic
def task_cancel(*, task: Task | VisibleTask, actor: Actor, reason: str = "") -> Task:
    """Cancel: a human, or the agent that created the task."""
    task = _locked(task)
    _ensure_open(task, TaskStatus.CANCELLED)
    if actor.is_agent and task.created_by_agent_id != actor.agent.pk:
        raise invalid_transition(
            task.status, TaskStatus.CANCELLED, "only the task's creator or a human may cancel it."
        )
    before, freed = _change_status(task, TaskStatus.CANCELLED)
    events.task_cancelled_event(task=task, actor=actor, before=before, reason=reason)
    if freed is not None:
        fill_from_queue(freed, locked=True)
    return task


def inbox_mark_read(*, agent: Agent, item_ids: list[int] | None = None) -> int:
    """Mark the agent's inbox items read (all unread ones when `item_ids` is None)."""
    items = InboxItem.objects.filter(agent=agent, read_at__isnull=True)
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    return items.update(read_at=timezone.now())
