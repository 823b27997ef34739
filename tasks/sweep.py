"""The stale-queue sweep (Celery beat, `tasks.sweep_stale_tasks`): escalate queued tasks that waited
too long, thousands at a time.

It escalates exactly as `services.task_escalate` does for the system — the same source and
target (`rules.escalation_source` / `escalation_target`), the same capacity verdict
(`rules.check_assignment`), the same state change (`services.apply_escalation`) and the same
event (`events.escalation_event`) — but per batch: one query takes the rows, a few load what
the rules need, one statement writes the tasks and `events.record_many` writes their events,
inbox items and webhooks.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from organization.models import Agent, Organization, TeamRule

from . import events, rules
from .events import snapshot
from .models import Task, TaskEvent, TaskStatus, Urgency
from .rules import ESCALATION_SOURCE_FIELDS, SYSTEM, Move
from .services import apply_escalation

log = logging.getLogger(__name__)

# How long a task may wait in a queue, by urgency, unless the organization's rule says otherwise.
STALE_DEFAULTS = {
    Urgency.CRITICAL: timedelta(minutes=15),
    Urgency.HIGH: timedelta(hours=1),
    Urgency.NORMAL: timedelta(hours=4),
    Urgency.LOW: timedelta(hours=24),
}


def stale_queued(now: datetime):
    """Queued tasks waiting longer than their organization's threshold, or past their deadline."""
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
            task = _task_of(row, agents, written)
            rule = rule_of.get(row["organization_id"]) or TeamRule(
                organization_id=row["organization_id"]
            )
            target = rules.escalation_target(
                rule=rule, source=rules.escalation_source(task), queued_for_id=task.queued_for_id
            )
        except Exception:
            _skip(row, skipped)
            continue
        plans.append((row, task, rule, target))

    workloads = rules.lock_workloads({t.pk for *_, t in plans if t is not None})
    updated, escalations = [], []
    for row, task, rule, target in plans:
        try:
            event = _escalate(row, task, rule, target, now, written, workloads)
        except Exception:
            _skip(row, skipped)
            continue
        updated.append(task)
        escalations.append(event)
    _bulk_apply(updated)
    events.record_many(escalations, now=written)
    return len(rows), len(updated), skipped


def _task_of(row: dict, agents: dict[int, Agent], written: datetime) -> Task:
    """The queued task of `row`, with the agents the escalation rule reads (no query)."""
    return Task(
        pk=row["pk"],
        organization_id=row["organization_id"],
        urgency=row["urgency"],
        deadline=row["deadline"],
        status=row["status"],
        queued_at=row["queued_at"],
        delegation_chain=row["delegation_chain"],
        # The sweep's UPDATE writes these too: a queued task holds no assignment.
        assigned_at=None,
        updated_at=written,
        **{f: agents.get(row[f"{f}_id"]) for f in ESCALATION_SOURCE_FIELDS},
    )


def _escalate(row, task, rule, target, now, written, workloads) -> TaskEvent:
    """Escalate `task` in memory as the system and return its event (nothing written yet)."""
    before = snapshot(task)
    verdict = None
    if target is not None:
        verdict = rules.check_assignment(
            org=Organization(pk=row["organization_id"]),
            actor=SYSTEM, target=target, move=Move.ESCALATE, rule=rule,
            workload=workloads[target.pk],
        )  # fmt: skip
    # The sweep leaves who queued the task as it was (the move records its own source).
    apply_escalation(task, target=target, verdict=verdict, queued_by=task.queued_by, now=written)
    if verdict is not None and verdict.has_room:
        workloads[target.pk] += 1
    reason = (
        "Past its deadline while queued."
        if row["deadline"] and row["deadline"] < now
        else f"Queued longer than the {row['urgency']} threshold."
    )
    return events.escalation_event(
        task=task, actor=SYSTEM, before=before, target=target, verdict=verdict, stale=True,
        reasoning=reason,
    )  # fmt: skip


_APPLIED_FIELDS = (
    "status", "assignee_id", "queued_for_id", "queued_at", "queued_by_id", "assigned_at",
    "delegation_chain", "updated_at",
)  # fmt: skip


def _bulk_apply(tasks: list[Task]) -> None:
    """Write the swept rows in one statement.

    On PostgreSQL one `UPDATE … FROM unnest(arrays)`: Django's bulk_update builds a CASE per
    column with a branch per row, which PostgreSQL evaluates row by row (quadratic in the batch).
    """
    if not tasks:
        return
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
