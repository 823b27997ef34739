"""Writes of the tasks engine. Every change of assignee or status goes through one of these.

Each service runs in one transaction: it locks the task row first, then the agents' rows (in pk
order), checks the rules through `rules.check_assignment`, writes the task, its TaskEvent, the
receiving agent's inbox item and webhook delivery, and refills the queue of an expert who
dropped below capacity — all or nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from organization import outbox
from organization.errors import Conflict, Forbidden
from organization.models import Agent, Organization, TeamRule
from organization.selectors import team_rule_of

from . import rules
from .models import (
    FINISHED_STATUSES,
    HELD_STATUSES,
    ActorKind,
    Decision,
    DeliveryStatus,
    EventKind,
    InboxItem,
    Task,
    TaskEvent,
    TaskStatus,
    Urgency,
    WebhookDelivery,
)
from .rules import SYSTEM, Actor, Move

log = logging.getLogger(__name__)

# The status an assignee may move its task to (issue 3 §1).
TRANSITIONS = {
    TaskStatus.ASSIGNED: {TaskStatus.IN_PROGRESS},
    TaskStatus.IN_PROGRESS: {TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.FAILED},
    TaskStatus.BLOCKED: {TaskStatus.IN_PROGRESS, TaskStatus.FAILED},
}

STALE_DEFAULTS = {
    Urgency.CRITICAL: timedelta(minutes=15),
    Urgency.HIGH: timedelta(hours=1),
    Urgency.NORMAL: timedelta(hours=4),
    Urgency.LOW: timedelta(hours=24),
}


# --- helpers -------------------------------------------------------------------------------


def invalid_transition(current: str, wanted: str, why: str = "") -> Conflict:
    message = f"Cannot transition from {current} to {wanted}"
    return Conflict(f"{message}: {why}" if why else f"{message}.", "invalid_transition")


def _handle(agent: Agent | None) -> str | None:
    return agent.handle if agent is not None else None


def snapshot(task: Task) -> dict:
    return {
        "status": task.status,
        "assignee": _handle(task.assignee),
        "queued_for": _handle(task.queued_for),
    }


def _locked(task: Task) -> Task:
    return (
        Task.objects.select_for_update(of=("self",))
        .select_related("assignee", "queued_for", "queued_by", "created_by_agent", "organization")
        .get(pk=task.pk)
    )


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


def task_payload(task: Task) -> dict:
    """The task as webhook receivers see it (the API's Task JSON without computed fields)."""
    return {
        "id": task.pk,
        "title": task.title,
        "required_expertise": task.required_expertise,
        "urgency": task.urgency,
        "deadline": task.deadline.isoformat() if task.deadline else None,
        "status": task.status,
        "assignee": _handle(task.assignee),
        "queued_for": _handle(task.queued_for),
        "delegation_chain": list(task.delegation_chain),
    }


def webhook_payload(event: TaskEvent, task: Task, recipient: Agent) -> dict:
    return {
        "event": f"task.{event.kind}",
        "event_id": event.pk,
        "organization": task.organization.slug if task.organization_id else None,
        "agent": recipient.handle,
        "actor": event.actor_label,
        "message": event.message,
        "decision": event.decision or None,
        "task": task_payload(task),
        "created_at": event.created_at.isoformat(),
    }


def _enqueue_deliveries(ids: list[int]) -> None:
    """Through the outbox: the move commits and answers even while the broker is away."""
    from .tasks import deliver_webhook

    if ids:
        outbox.enqueue_many(deliver_webhook.name, [(pk,) for pk in ids])


def _record(
    *,
    task: Task,
    kind: str,
    actor: Actor,
    before: dict,
    recipient: Agent | None = None,
    message: str = "",
    **decision,
) -> TaskEvent:
    """Write the audit row; the receiving agent gets an inbox item and a webhook, never for its own act."""
    event = TaskEvent.objects.create(
        organization_id=task.organization_id,
        task=task,
        kind=kind,
        actor_kind=actor.kind,
        actor_agent=actor.agent,
        actor_user=actor.user if actor.kind == ActorKind.USER else None,
        actor_label=actor.label,
        recipient=recipient,
        before=before,
        after=snapshot(task),
        message=message,
        **decision,
    )
    if recipient is not None and not actor.is_(recipient):
        InboxItem.objects.create(
            organization_id=task.organization_id,
            agent=recipient,
            task=task,
            event=event,
            kind=kind,
            message=message,
        )
        if recipient.webhook_url:
            delivery = WebhookDelivery.objects.create(
                organization_id=task.organization_id,
                agent=recipient,
                event=event,
                url=recipient.webhook_url,
                payload=webhook_payload(event, task, recipient),
            )
            _enqueue_deliveries([delivery.pk])
    return event


def _give(task: Task, target: Agent, now: datetime) -> None:
    task.status = TaskStatus.ASSIGNED
    task.assignee = target
    task.queued_for = None
    task.queued_by = None
    task.queued_at = None
    task.assigned_at = now
    task.delegation_chain = rules.chain_after(list(task.delegation_chain), target.handle)


def _hand_over(
    task: Task, to: Agent, *, actor: Actor, kind: str, message: str, **decision
) -> TaskEvent:
    """Give the task to `to` and record it (the rules were checked by the caller)."""
    before = snapshot(task)
    _give(task, to, timezone.now())
    task.save()
    return _record(
        task=task, kind=kind, actor=actor, before=before, recipient=to, message=message,
        **decision,
    )  # fmt: skip


def _wait_for(task: Task, target: Agent, by: Agent | None, now: datetime) -> None:
    task.status = TaskStatus.QUEUED
    task.assignee = None
    task.queued_for = target
    task.queued_by = by
    task.queued_at = now


def _check_move(
    task: Task, actor: Actor, to: Agent, move: str, rule: TeamRule | None = None
) -> tuple[Agent | None, rules.Verdict]:
    """Lock the target's and the current holder's rows, then run the rules for `move`."""
    previous = task.assignee
    rules.lock_workloads([to.pk] + ([previous.pk] if previous else []))
    verdict = rules.check_assignment(
        org=task.organization, actor=actor, target=to, move=move, task=task, rule=rule
    )
    return previous, verdict


def fill_from_queue(agent: Agent) -> list[Task]:
    """Give `agent` its most urgent, oldest queued tasks while it has room (agent row locked)."""
    if agent.is_paused:
        return []
    workload = rules.lock_workloads([agent.pk])[agent.pk]
    given = []
    while workload < agent.workload_capacity:
        task = (
            Task.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("organization", "queued_for")
            .filter(queued_for=agent, status=TaskStatus.QUEUED)
            .order_by("-urgency_rank", "created_at", "pk")
            .first()
        )
        if task is None:
            break
        rules.check_assignment(
            org=task.organization, actor=SYSTEM, target=agent, move=Move.AUTO, task=task,
            workload=workload,
        )  # fmt: skip
        _hand_over(
            task, agent, actor=SYSTEM, kind=EventKind.AUTO_ASSIGNED,
            message=f"{agent.handle} has room again: the queued task is assigned to them.",
        )  # fmt: skip
        workload += 1
        given.append(task)
    return given


def _refill_if_dropped(previous: Agent | None, task: Task) -> None:
    if previous is not None and task.assignee_id != previous.pk:
        fill_from_queue(previous)


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
    who = f" and assigned it to {assignee.handle}" if assignee else " (queued, unassigned)"
    _record(
        task=task,
        kind=EventKind.CREATED,
        actor=actor,
        before={},
        recipient=assignee,
        message=f"{actor.label} created the task{who}.",
    )
    return task


@transaction.atomic
def task_assign(*, task: Task, actor: Actor, to: Agent | None = None) -> Task:
    """Assign to `to`, or (no `to`) the calling agent claims the task."""
    task = _locked(task)
    claim = to is None or actor.is_(to)
    if to is None:
        to = actor.agent
        if to is None:
            raise Forbidden(
                "agent_id is required: only an agent can claim a task.", "agent_required"
            )
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
    previous, _ = _check_move(task, actor, to, Move.CLAIM if claim else Move.ASSIGN)
    _hand_over(
        task, to, actor=actor, kind=EventKind.CLAIMED if claim else EventKind.ASSIGNED,
        message=f"{to.handle} claimed the task." if claim
        else f"{actor.label} assigned the task to {to.handle}.",
    )  # fmt: skip
    _refill_if_dropped(previous, task)
    return task


@transaction.atomic
def task_delegate(
    *,
    task: Task,
    actor: Actor,
    to: Agent,
    primary_reason: str = "",
    fallback: str = "",
    reasoning: str = "",
    notes: str = "",
) -> Task:
    """Seed 001's DELEGATE: an agent passes the task on, storing the DELEGATION DECISION."""
    if not actor.is_agent:
        raise Forbidden(
            "Only an agent delegates (it acts as one agent); a human reassigns with assign.",
            "agent_required",
        )
    task = _locked(task)
    _ensure_open(task, TaskStatus.ASSIGNED)
    _ensure_may_move(task, actor, TaskStatus.ASSIGNED)
    previous, _ = _check_move(task, actor, to, Move.DELEGATE)
    _hand_over(
        task,
        to,
        actor=actor,
        kind=EventKind.DELEGATED,
        message=f"{actor.label} delegated the task to {to.handle}.",
        decision=Decision.DELEGATE,
        primary_choice=to.handle,
        primary_reason=primary_reason,
        fallback=fallback,
        reasoning=reasoning,
        notes=notes,
        **_cross_team(actor, to),
    )
    _refill_if_dropped(previous, task)
    return task


def _cross_team(actor: Actor, to: Agent) -> dict:
    """The event fields of an agent's routing: whether it crosses teams, and the note if so."""
    if not actor.is_agent or not rules.is_cross_team(actor.agent, to):
        return {"cross_team": False}
    return {"cross_team": True, "coordination_note": rules.coordination_note(actor.agent, to)}


@transaction.atomic
def task_queue(
    *,
    task: Task,
    actor: Actor,
    to: Agent,
    primary_reason: str = "",
    fallback: str = "",
    reasoning: str = "",
    notes: str = "",
    wait_time_seconds: int | None = None,
) -> Task:
    """Seed 001's QUEUE: the task waits for a busy (full, not offline) expert.

    The DELEGATION DECISION is stored; `wait_time_seconds` is the caller's Wait Time, else ours.
    """
    from .selectors import estimated_wait_for_new

    task = _locked(task)
    _ensure_open(task, TaskStatus.QUEUED)
    if task.status == TaskStatus.QUEUED and task.queued_for_id == to.pk:
        raise Conflict(f"The task is already queued for {to.handle}.", "already_queued")
    _ensure_may_move(task, actor, TaskStatus.QUEUED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    previous, _ = _check_move(task, actor, to, Move.QUEUE)
    wait = estimated_wait_for_new(agent=to, urgency_rank=task.urgency_rank)
    before = snapshot(task)
    _wait_for(task, to, actor.agent or task.queued_by, timezone.now())
    task.save()
    _record(
        task=task,
        kind=EventKind.QUEUED,
        actor=actor,
        before=before,
        recipient=to,
        message=f"{actor.label} queued the task for {to.handle} (estimated wait {wait} s).",
        decision=Decision.QUEUE,
        primary_choice=to.handle,
        primary_reason=primary_reason,
        fallback=fallback,
        reasoning=reasoning,
        notes=notes,
        wait_time_seconds=wait if wait_time_seconds is None else wait_time_seconds,
        **_cross_team(actor, to),
    )
    _refill_if_dropped(previous, task)
    return task


# On whose behalf a task is escalated when a human or the system does it: the first one set.
ESCALATION_SOURCE_FIELDS = ("assignee", "queued_by", "created_by_agent", "queued_for")


def escalation_source(task: Task) -> Agent | None:
    return next(
        (getattr(task, f) for f in ESCALATION_SOURCE_FIELDS if getattr(task, f"{f}_id")), None
    )


def escalation_target(
    *, rule: TeamRule, source: Agent | None, queued_for_id: int | None = None
) -> Agent | None:
    """The source's senior, else the default supervisor; None = humans.

    Never an offline agent, the source itself, nor the expert the task already waits for.
    """
    exclude = {pk for pk in (getattr(source, "pk", None), queued_for_id) if pk}
    for candidate in (source.senior if source else None, rule.default_supervisor):
        if candidate is not None and not candidate.is_paused and candidate.pk not in exclude:
            return candidate
    return None


@transaction.atomic
def task_escalate(
    *,
    task: Task,
    actor: Actor,
    reason: str = "",
    primary_reason: str = "",
    fallback: str = "",
    reasoning: str = "",
    notes: str = "",
) -> Task:
    """Seed 001's ESCALATE: to the senior, else the default supervisor, else humans.

    The DELEGATION DECISION is stored; `reason` is the reasoning when `reasoning` is not given.
    """
    task = _locked(task)
    _ensure_open(task, TaskStatus.ESCALATED)
    if task.status == TaskStatus.ESCALATED:
        raise invalid_transition(task.status, TaskStatus.ESCALATED, "it already waits for humans.")
    _ensure_may_move(task, actor, TaskStatus.ESCALATED)
    org = task.organization
    rule = team_rule_of(org=org)
    source = actor.agent if actor.is_agent else escalation_source(task)
    target = escalation_target(rule=rule, source=source, queued_for_id=task.queued_for_id)
    previous = task.assignee
    before = snapshot(task)
    now = timezone.now()
    decision = {
        "decision": Decision.ESCALATE,
        "primary_reason": primary_reason,
        "fallback": fallback,
        "reasoning": reasoning or reason,
        "notes": notes,
    }
    if target is None:
        task.status = TaskStatus.ESCALATED
        task.assignee = None
        task.queued_for = None
        task.queued_at = None
        task.save()
        _record(
            task=task, kind=EventKind.ESCALATED, actor=actor, before=before,
            message=f"{actor.label} escalated the task to humans: no senior or supervisor available.",
            **decision,
        )  # fmt: skip
    else:
        _, verdict = _check_move(task, actor, target, Move.ESCALATE, rule=rule)
        if verdict.has_room:
            _give(task, target, now)
            message = f"{actor.label} escalated the task to {target.handle}."
        else:
            _wait_for(task, target, source, now)
            message = (
                f"{actor.label} escalated the task to {target.handle}, who is at capacity "
                f"({verdict.workload}/{verdict.capacity}): the task is queued for them."
            )
        task.save()
        _record(
            task=task, kind=EventKind.ESCALATED, actor=actor, before=before, recipient=target,
            message=message, primary_choice=target.handle, **decision,
        )  # fmt: skip
    _refill_if_dropped(previous, task)
    return task


def _change_status(task: Task, actor: Actor, status: str, *, kind: str, message: str, **decision):
    """Move the (locked, checked) task to `status`; a finished task frees its holder's room."""
    holder = task.assignee if task.status in HELD_STATUSES else None
    if holder is not None:
        rules.lock_workloads([holder.pk])
    before = snapshot(task)
    task.status = status
    if status in FINISHED_STATUSES:
        task.finished_at = timezone.now()
        task.queued_for = None
    task.save()
    _record(task=task, kind=kind, actor=actor, before=before, message=message, **decision)
    if holder is not None and status in FINISHED_STATUSES:
        fill_from_queue(holder)
    return task


@transaction.atomic
def task_set_status(*, task: Task, actor: Actor, status: str, note: str = "") -> Task:
    """The assignee moves its task: assigned → in_progress → blocked ⇄ in_progress → completed | failed."""
    task = _locked(task)
    if actor.is_agent and task.assignee_id != actor.agent.pk:
        raise invalid_transition(
            task.status, status, "only the task's assignee may change its status."
        )
    if status not in TRANSITIONS.get(task.status, set()):
        raise invalid_transition(task.status, status)
    return _change_status(
        task, actor, status, kind=EventKind.STATUS_CHANGED,
        message=f"{actor.label}: {task.status} → {status}." + (f" {note}" if note else ""),
        notes=note,
    )  # fmt: skip


@transaction.atomic
def task_cancel(*, task: Task, actor: Actor, reason: str = "") -> Task:
    """Cancel: a human, or the agent that created the task."""
    task = _locked(task)
    _ensure_open(task, TaskStatus.CANCELLED)
    if actor.is_agent and task.created_by_agent_id != actor.agent.pk:
        raise invalid_transition(
            task.status, TaskStatus.CANCELLED, "only the task's creator or a human may cancel it."
        )
    return _change_status(
        task, actor, TaskStatus.CANCELLED, kind=EventKind.CANCELLED,
        message=f"{actor.label} cancelled the task." + (f" {reason}" if reason else ""),
        reasoning=reason,
    )  # fmt: skip


def inbox_mark_read(*, agent: Agent, item_ids: list[int] | None = None) -> int:
    """Mark the agent's inbox items read (all unread ones when `item_ids` is None)."""
    items = InboxItem.objects.filter(agent=agent, read_at__isnull=True)
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    return items.update(read_at=timezone.now())


# --- the stale-queue sweep (Celery beat) ----------------------------------------------------


def stale_queued(now: datetime):
    """Queued tasks waiting longer than their organization's threshold, or past their deadline."""
    from django.db.models import DateTimeField, DurationField, ExpressionWrapper

    waited_too_long = Q()
    for urgency, default in STALE_DEFAULTS.items():
        limit = ExpressionWrapper(
            Value(now, output_field=DateTimeField())
            - Coalesce(
                F(f"organization__team_rule__stale_after_{urgency}"),
                Value(default, output_field=DurationField()),
            ),
            output_field=DateTimeField(),
        )
        waited_too_long |= Q(urgency=urgency, queued_at__lt=limit)
    return Task.objects.filter(status=TaskStatus.QUEUED).filter(
        waited_too_long | Q(deadline__lt=now)
    )


@dataclass
class SweepResult:
    """What one sweep did: how many tasks it escalated, and the tasks it had to skip."""

    escalated: int = 0
    skipped: list[int] = field(default_factory=list)


def sweep_stale_queued(
    *, now: datetime | None = None, batch_size: int | None = None
) -> SweepResult:
    """Escalate every stale queued task, in batches.

    Rows are taken with SKIP LOCKED, so two sweeps running at once split the work and never
    escalate one task twice; an escalated task is no longer stale, so a re-run does nothing.
    A row that cannot be escalated (it raises) is skipped and logged, and the rest of its batch
    is escalated all the same; it stays queued and is reported by every sweep until fixed.
    """
    batch_size = batch_size or settings.TASKS_SWEEP_BATCH_SIZE
    result = SweepResult()
    while True:
        taken, escalated, skipped = _sweep_batch(
            now or timezone.now(), batch_size, exclude=result.skipped
        )
        result.escalated += escalated
        result.skipped += skipped
        if taken < batch_size:
            return result


_SWEEP_FIELDS = (
    "pk", "organization_id", "urgency", "deadline", "status", "queued_at", "delegation_chain",
    *(f"{f}_id" for f in ESCALATION_SOURCE_FIELDS),
)  # fmt: skip


def _skip(row: dict, skipped: list[int]) -> None:
    log.exception("Stale sweep: task %s cannot be escalated; skipped", row["pk"])
    skipped.append(row["pk"])


@transaction.atomic
def _sweep_batch(now: datetime, batch_size: int, exclude=()) -> tuple[int, int, list[int]]:
    """Escalate one batch; returns (rows taken, tasks escalated, task ids skipped)."""
    rows = list(
        stale_queued(now)
        .exclude(pk__in=list(exclude))
        .select_for_update(skip_locked=True, of=("self",))
        .order_by("pk")
        .values(*_SWEEP_FIELDS)[:batch_size]
    )
    if not rows:
        return 0, 0, []
    # `now` decides what is stale; the rows record when the sweep actually wrote them.
    written = timezone.now()
    org_ids = {r["organization_id"] for r in rows}
    rule_of = {
        r.organization_id: r
        for r in TeamRule.objects.filter(organization_id__in=org_ids).select_related(
            "default_supervisor"
        )
    }
    agent_ids = {r[f"{f}_id"] for r in rows for f in ESCALATION_SOURCE_FIELDS if r[f"{f}_id"]}
    agents = {a.pk: a for a in Agent.objects.filter(pk__in=agent_ids).select_related("senior")}

    # Per-row isolation: a row that raises is skipped (and reported), never its whole batch.
    plans, skipped = [], []
    for row in rows:
        try:
            rule = rule_of.get(row["organization_id"]) or TeamRule(
                organization_id=row["organization_id"]
            )
            source = next(
                (agents[row[f"{f}_id"]] for f in ESCALATION_SOURCE_FIELDS if row[f"{f}_id"]),
                None,
            )
            target = escalation_target(rule=rule, source=source, queued_for_id=row["queued_for_id"])
        except Exception:
            _skip(row, skipped)
            continue
        plans.append((row, rule, target))

    targets = {t.pk: t for _, _, t in plans if t is not None}
    workloads = rules.lock_workloads(targets)
    updated, events = [], []
    for row, rule, target in plans:
        try:
            task, event = _sweep_row(row, rule, target, now, written, agents, workloads)
        except Exception:
            _skip(row, skipped)
            continue
        updated.append(task)
        events.append(event)
    _bulk_apply(updated)
    _bulk_record(events, written)
    _sweep_webhooks(events, updated, targets)
    return len(rows), len(updated), skipped


def _sweep_row(row, rule, target, now, written, agents, workloads) -> tuple[Task, TaskEvent]:
    """The task's new state and its escalation event (nothing written yet)."""
    reason = (
        "Past its deadline while queued."
        if row["deadline"] and row["deadline"] < now
        else f"Queued longer than the {row['urgency']} threshold."
    )
    queued_for = agents.get(row["queued_for_id"])
    before = {"status": row["status"], "assignee": None, "queued_for": _handle(queued_for)}
    task = Task(pk=row["pk"], organization_id=row["organization_id"], updated_at=written)
    task.delegation_chain = row["delegation_chain"]
    task.queued_by_id = row["queued_by_id"]
    task.assigned_at = None
    if target is None:
        task.status, task.assignee_id, task.queued_for_id, task.queued_at = (
            TaskStatus.ESCALATED, None, None, None,
        )  # fmt: skip
        after = {"status": task.status, "assignee": None, "queued_for": None}
        message = "The system escalated the stale task to humans."
    else:
        verdict = rules.check_assignment(
            org=Organization(pk=row["organization_id"]),
            actor=SYSTEM, target=target, move=Move.ESCALATE, rule=rule,
            workload=workloads[target.pk],
        )  # fmt: skip
        if verdict.has_room:
            task.status, task.assignee_id, task.queued_for_id, task.queued_at = (
                TaskStatus.ASSIGNED, target.pk, None, None,
            )  # fmt: skip
            task.assigned_at = written
            task.queued_by_id = None
            task.delegation_chain = rules.chain_after(list(row["delegation_chain"]), target.handle)
            workloads[target.pk] += 1
            after = {"status": task.status, "assignee": target.handle, "queued_for": None}
            message = f"The system escalated the stale task to {target.handle}."
        else:
            task.status, task.assignee_id, task.queued_for_id, task.queued_at = (
                TaskStatus.QUEUED, None, target.pk, written,
            )  # fmt: skip
            after = {"status": task.status, "assignee": None, "queued_for": target.handle}
            message = (
                f"The system escalated the stale task to {target.handle}, who is at capacity: "
                "the task is queued for them."
            )
    return task, (
        TaskEvent(
            organization_id=row["organization_id"],
            task_id=row["pk"],
            kind=EventKind.ESCALATED,
            actor_kind=ActorKind.SYSTEM,
            actor_label=SYSTEM.label,
            recipient=target,
            before=before,
            after=after,
            message=message,
            decision=Decision.ESCALATE,
            primary_choice=_handle(target) or "",
            reasoning=reason,
        )  # fmt: skip
    )


_APPLIED_FIELDS = (
    "status", "assignee_id", "queued_for_id", "queued_at", "queued_by_id", "assigned_at",
    "delegation_chain", "updated_at",
)  # fmt: skip


def _bulk_apply(tasks: list[Task]) -> None:
    """Write the swept rows in one statement.

    On PostgreSQL one `UPDATE … FROM unnest(arrays)`: Django's bulk_update builds a CASE per
    column with a branch per row, which PostgreSQL evaluates row by row (quadratic in the batch).
    """
    if connection.vendor != "postgresql":
        Task.objects.bulk_update(tasks, list(_APPLIED_FIELDS))
        return
    table = Task._meta.db_table
    sql = f"""
        UPDATE {table} AS t SET
            status = v.status, assignee_id = v.assignee_id, queued_for_id = v.queued_for_id,
            queued_at = v.queued_at, queued_by_id = v.queued_by_id, assigned_at = v.assigned_at,
            delegation_chain = v.chain::jsonb, updated_at = v.updated_at
        FROM unnest(
            %s::bigint[], %s::varchar[], %s::bigint[], %s::bigint[], %s::timestamptz[],
            %s::bigint[], %s::timestamptz[], %s::text[], %s::timestamptz[]
        ) AS v(id, status, assignee_id, queued_for_id, queued_at, queued_by_id, assigned_at,
               chain, updated_at)
        WHERE t.id = v.id
    """  # noqa: S608  (the table name is ours, every value is a parameter)
    columns = [
        [t.pk for t in tasks],
        [t.status for t in tasks],
        [t.assignee_id for t in tasks],
        [t.queued_for_id for t in tasks],
        [t.queued_at for t in tasks],
        [t.queued_by_id for t in tasks],
        [t.assigned_at for t in tasks],
        [json.dumps(t.delegation_chain) for t in tasks],
        [t.updated_at for t in tasks],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, columns)


def _bulk_record(events: list[TaskEvent], now: datetime) -> None:
    """Insert the batch's events (setting their pks) and the recipients' inbox items.

    On PostgreSQL two `INSERT … SELECT FROM unnest(arrays)`: Django's bulk_create compiles a
    placeholder per value, which costs more than the insert itself at this size.
    """
    if connection.vendor != "postgresql":
        TaskEvent.objects.bulk_create(events)
        InboxItem.objects.bulk_create(
            InboxItem(
                organization_id=e.organization_id,
                agent_id=e.recipient_id,
                task_id=e.task_id,
                event=e,
                kind=e.kind,
                message=e.message,
            )  # fmt: skip
            for e in events
            if e.recipient_id
        )
        return
    for e in events:
        e.created_at = now
    event_table, inbox_table = TaskEvent._meta.db_table, InboxItem._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {event_table} (
                organization_id, task_id, kind, actor_kind, actor_agent_id, actor_user_id,
                actor_label, recipient_id, before, after, message, decision, primary_choice,
                primary_reason, fallback, reasoning, wait_time_seconds, notes, created_at)
            SELECT v.org, v.task, v.kind, v.actor_kind, NULL, NULL, v.actor_label, v.recipient,
                   v.before::jsonb, v.after::jsonb, v.message, v.decision, v.choice, '', '',
                   v.reasoning, NULL, '', %s
            FROM unnest(
                %s::bigint[], %s::bigint[], %s::varchar[], %s::varchar[], %s::varchar[],
                %s::bigint[], %s::text[], %s::text[], %s::text[], %s::varchar[], %s::varchar[],
                %s::text[]
            ) AS v(org, task, kind, actor_kind, actor_label, recipient, before, after, message,
                   decision, choice, reasoning)
            RETURNING id, task_id
            """,  # noqa: S608  (table names are ours, every value is a parameter)
            [
                now,
                [e.organization_id for e in events],
                [e.task_id for e in events],
                [e.kind for e in events],
                [e.actor_kind for e in events],
                [e.actor_label for e in events],
                [e.recipient_id for e in events],
                [json.dumps(e.before) for e in events],
                [json.dumps(e.after) for e in events],
                [e.message for e in events],
                [e.decision for e in events],
                [e.primary_choice for e in events],
                [e.reasoning for e in events],
            ],
        )
        ids = dict((task_id, pk) for pk, task_id in cursor.fetchall())
        for e in events:
            e.pk = e.id = ids[e.task_id]
            e._state.adding = False
        inbox = [e for e in events if e.recipient_id]
        if inbox:
            cursor.execute(
                f"""
                INSERT INTO {inbox_table}
                    (organization_id, agent_id, task_id, event_id, kind, message, read_at,
                     created_at)
                SELECT v.org, v.agent, v.task, v.event, v.kind, v.message, NULL, %s
                FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
                            %s::varchar[], %s::text[]) AS v(org, agent, task, event, kind, message)
                """,  # noqa: S608
                [
                    now,
                    [e.organization_id for e in inbox],
                    [e.recipient_id for e in inbox],
                    [e.task_id for e in inbox],
                    [e.pk for e in inbox],
                    [e.kind for e in inbox],
                    [e.message for e in inbox],
                ],
            )


def _sweep_webhooks(events: list[TaskEvent], tasks: list[Task], targets: dict[int, Agent]) -> None:
    hooked = [e for e in events if e.recipient_id and targets[e.recipient_id].webhook_url]
    if not hooked:
        return
    by_pk = {
        t.pk: t
        for t in Task.objects.filter(pk__in=[e.task_id for e in hooked]).select_related(
            "organization", "assignee", "queued_for"
        )
    }
    deliveries = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            organization_id=e.organization_id,
            agent_id=e.recipient_id,
            event=e,
            url=targets[e.recipient_id].webhook_url,
            payload=webhook_payload(e, by_pk[e.task_id], targets[e.recipient_id]),
            status=DeliveryStatus.PENDING,
        )
        for e in hooked
    )
    _enqueue_deliveries([d.pk for d in deliveries])
