"""The stale-queue sweep (`tasks.sweep_stale_tasks`): escalate queued tasks that waited too long.

It escalates exactly as `task_escalate` does for the system, but per batch: the rules run once
per shape of task and verdict, and a few statements write the batch (tests/tasks/test_sweep.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import (
    DateTimeField,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    Model,
    OuterRef,
    Q,
    TextField,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Greatest, Least
from django.utils import timezone

from organization.models import STALE_AFTER_MAX, STALE_AFTER_MIN, Agent, Organization, TeamRule

from . import events, rules, sql, webhooks
from .event_writer import inbox_item, notifies, record_many
from .events import snapshot
from .models import (
    EventKind,
    InboxItem,
    Task,
    TaskEvent,
    TaskStatus,
    Urgency,
    WebhookDelivery,
)
from .rules import ESCALATION_SOURCE_FIELDS, SYSTEM, Move
from .services.changes import apply_escalation
from .services.decisions import escalation_decision
from .sql import NO_KEY
from .wakes import announce_batch

log = logging.getLogger(__name__)

# How long a task may wait in a queue, by urgency, unless the organization's rule says otherwise.
STALE_DEFAULTS = {
    Urgency.CRITICAL: timedelta(minutes=15),
    Urgency.HIGH: timedelta(hours=1),
    Urgency.NORMAL: timedelta(hours=4),
    Urgency.LOW: timedelta(hours=24),
}


def stale_queued(now: datetime):
    """Queued tasks waiting longer than their organization's threshold, or past their deadline.

    A deadline makes a task stale once: escalated since it passed, it waits its threshold again.
    """
    waited_too_long = Q()
    for urgency, default in STALE_DEFAULTS.items():
        # Clamped to the bounds the team rule's validators keep (a row stored before them, or
        # written past them, must not put `now - threshold` out of PostgreSQL's timestamps and
        # stop the sweep of every organization). Coalesce first: GREATEST skips a NULL.
        threshold = Least(
            Greatest(
                Coalesce(
                    F(f"organization__team_rule__stale_after_{urgency}"),
                    Value(default, output_field=DurationField()),
                ),
                Value(STALE_AFTER_MIN, output_field=DurationField()),
            ),
            Value(STALE_AFTER_MAX, output_field=DurationField()),
        )
        limit = ExpressionWrapper(
            Value(now, output_field=DateTimeField()) - threshold, output_field=DateTimeField()
        )
        waited_too_long |= Q(urgency=urgency, queued_at__lt=limit)
    return Task.objects.filter(status=TaskStatus.QUEUED).filter(
        waited_too_long
        | Q(deadline__lt=now, queued_at__lt=F("deadline"))
        | Q(deadline__lt=now, queued_at__gte=F("deadline"))
        & ~Exists(
            TaskEvent.objects.filter(
                task=OuterRef("pk"), created_at__gte=OuterRef("deadline"), kind=EventKind.ESCALATED
            )
        )
    )


@dataclass
class SweepResult:
    """What one sweep did: how many tasks it escalated, and the tasks it had to skip."""

    escalated: int = 0
    skipped: list[int] = field(default_factory=list)


def sweep_stale_queued(
    *, now: datetime | None = None, batch_size: int | None = None
) -> SweepResult:
    """Escalate every stale queued task, in batches up the pk order; two sweeps may overlap.

    A row that raises is skipped and logged, the rest of its batch escalated all the same.
    """
    batch_size = batch_size or settings.TASKS_SWEEP_BATCH_SIZE
    result = SweepResult()
    after = 0
    while True:
        taken, after, escalated, skipped = _sweep_batch(now or timezone.now(), batch_size, after)
        result.escalated += escalated
        result.skipped += skipped
        if taken < batch_size:
            return result


# Not `queued_at`: the move overwrites it, so an escalation cannot depend on it.
_SWEEP_FIELDS = (
    "pk",
    "organization_id",
    "urgency",
    "deadline",
    "status",
    *(f"{f}_id" for f in ESCALATION_SOURCE_FIELDS),
)
# What decides a row's target (`rules.escalation_source` and `escalation_target`).
_TARGET_FIELDS = ("organization_id", *(f"{f}_id" for f in ESCALATION_SOURCE_FIELDS))
# What decides its escalation, with its chain and the verdict: not its urgency nor its deadline,
# which only make the reason the event stores (the decision's reasoning, the sweep's own).
_SHAPE_FIELDS = (*_TARGET_FIELDS, "status")


def _skip(row: dict, skipped: list[int]) -> None:
    log.exception("Stale sweep: task %s cannot be escalated; skipped", row["pk"])
    skipped.append(row["pk"])


@transaction.atomic
def _sweep_batch(now: datetime, batch_size: int, after: int) -> tuple[int, int, int, list[int]]:
    """Escalate one batch of rows after pk `after`; returns (rows taken, last pk, tasks
    escalated, task ids skipped)."""
    rows = list(
        stale_queued(now)
        .filter(pk__gt=after)
        .select_for_update(skip_locked=True, of=("self",), **NO_KEY)
        .order_by("pk")
        # The chain as its text: a key as it is, decoded only for the rows the rules run on.
        .values(*_SWEEP_FIELDS, chain=Cast("delegation_chain", TextField()))[:batch_size]
    )
    if not rows:
        return 0, after, 0, []
    # `now` decides what is stale; the rows record when the sweep actually wrote them.
    written = timezone.now()
    org_ids = {r["organization_id"] for r in rows}
    rule_of = {
        r.organization_id: r
        for r in TeamRule.objects.filter(organization_id__in=org_ids).select_related(
            "default_supervisor"
        )
    }
    for org_id in org_ids - rule_of.keys():
        rule_of[org_id] = TeamRule(organization_id=org_id)
    agent_ids = {r[f"{f}_id"] for r in rows for f in ESCALATION_SOURCE_FIELDS if r[f"{f}_id"]}
    agents = {a.pk: a for a in Agent.objects.filter(pk__in=agent_ids).select_related("senior")}

    # Per-row isolation: a row that raises is skipped (and reported), never its whole batch.
    # Nothing that raised is remembered: each row of a failing shape raises (and is logged) itself.
    skipped: list[int] = []
    target_of: dict[tuple, Agent | None] = {}
    planned = []
    for row in rows:
        source = tuple(row[f] for f in _TARGET_FIELDS)
        if source not in target_of:
            try:
                task = _task_of(row, agents, written)
                target_of[source] = rules.escalation_target(
                    rule=rule_of[row["organization_id"]],
                    source=rules.escalation_source(task),
                    queued_for_id=task.queued_for_id,
                )
            except Exception:
                _skip(row, skipped)
                continue
        planned.append((row, target_of[source]))

    # The targets themselves, refreshed from their locked rows: one paused since they were read
    # is refused (`agent_offline`, the row skipped), and the next sweep escalates it elsewhere.
    workloads = rules.lock_workloads([t for _, t in planned if t is not None])
    orgs = {org_id: Organization(pk=org_id) for org_id in org_ids}
    outcomes: dict[tuple, _Outcome] = {}
    escalated: list[tuple[int, str, _Outcome]] = []
    for row, target in planned:
        rule = rule_of[row["organization_id"]]
        shape = _shape(row)
        try:
            verdict = None
            if target is not None:
                verdict = rules.check_assignment(
                    org=orgs[row["organization_id"]],
                    actor=SYSTEM,
                    target=target,
                    move=Move.ESCALATE,
                    rule=rule,
                    workload=workloads[target.pk],
                )
            outcome = outcomes.get((shape, verdict))
            if outcome is None:
                outcome = _outcome(row, agents, rule, target, verdict, now, written)
                outcomes[shape, verdict] = outcome
        except Exception:
            _skip(row, skipped)
            continue
        if verdict is not None and verdict.has_room:
            workloads[target.pk] += 1
        escalated.append((row["pk"], _reason(row, now), outcome))
    to_humans = _escalated_to_humans(planned, escalated, agents, written)
    _write(escalated, written)
    _ask_humans_to_pick(to_humans)
    return len(rows), rows[-1]["pk"], len(escalated), skipped


def _escalated_to_humans(planned, escalated, agents, written) -> dict[int, Agent | None]:
    """Task id → the agent it was escalated for, of the batch's tasks escalated to humans in an
    organization with approval policies (read before the write clears the queuer)."""
    done = {pk for pk, _, _ in escalated}
    rows = [row for row, target in planned if target is None and row["pk"] in done]
    if not rows:
        return {}
    gated = set(
        Organization.objects.filter(
            pk__in={row["organization_id"] for row in rows}, has_approval_policies=True
        ).values_list("pk", flat=True)
    )
    return {
        row["pk"]: rules.escalation_source(_task_of(row, agents, written))
        for row in rows
        if row["organization_id"] in gated
    }


def _ask_humans_to_pick(sources: dict[int, Agent | None]) -> None:
    """An `escalation_to_humans` policy covering the agent a task was escalated for asks a human
    to pick its taker, as at every other door (`escalation_decision`)."""
    if not sources:
        return
    tasks = Task.objects.select_related("organization").in_bulk(list(sources))
    for pk, source in sources.items():
        escalation_decision(task=tasks[pk], actor=SYSTEM, source=source)


def _reason(row: dict, now: datetime) -> str:
    if row["deadline"] and row["deadline"] < now:
        return "Past its deadline while queued."
    return f"Queued longer than the {row['urgency']} threshold."


def _shape(row: dict) -> tuple:
    """What the escalation of `row` depends on (see the module's docstring)."""
    return (*(row[f] for f in _SHAPE_FIELDS), row["chain"])


def _task_of(row: dict, agents: dict[int, Agent], written: datetime) -> Task:
    """The queued task of `row`, with the agents the escalation rule reads (no query)."""
    return Task(
        pk=row["pk"],
        organization_id=row["organization_id"],
        urgency=row["urgency"],
        deadline=row["deadline"],
        status=row["status"],
        delegation_chain=json.loads(row["chain"]),
        # The sweep's UPDATE writes these too: a queued task holds no assignment.
        assigned_at=None,
        updated_at=written,
        **{f: agents.get(row[f"{f}_id"]) for f in ESCALATION_SOURCE_FIELDS},
    )


# The task columns an escalation writes.
_APPLIED_FIELDS = (
    "status",
    "assignee_id",
    "queued_for_id",
    "queued_at",
    "queued_by_id",
    "assigned_at",
    "delegation_chain",
    "updated_at",
)


@dataclass
class _Outcome:
    """An escalation as written, but for what is the task's own (its id, its event's reasoning):
    the task's new values, the event's, and the inbox item's when the target is told (None
    otherwise); and the same as JSON members, encoded once for all the tasks that share it."""

    task: dict
    event: dict
    inbox: dict | None
    recipient: Agent | None

    def __post_init__(self):
        self.task_json = _members(self.task)
        self.event_json = _members(self.event)
        self.inbox_json = _members(self.inbox) if self.inbox is not None else None

    def event_of(self, task_id: int, reasoning: str, **values) -> TaskEvent:
        event = TaskEvent(**self.event, task_id=task_id, reasoning=reasoning, **values)
        event.recipient = self.recipient
        return event

    @property
    def asks_recipient(self) -> bool:
        """Only a senior given the task is asked to act; one it is queued for is told (as a
        move)."""
        return self.inbox is not None and self.task["assignee_id"] == self.recipient.pk


def _outcome(row, agents, rule, target, verdict, now, written) -> _Outcome:
    """Escalate `row`'s task in memory as the system: what to write (nothing written yet)."""
    task = _task_of(row, agents, written)
    before = snapshot(task)
    # Queued for a full senior, the task keeps who queued it (the move records its own source);
    # escalated to humans, it has no queuer any more.
    apply_escalation(task, target=target, verdict=verdict, queued_by=task.queued_by, now=written)
    stale = {"stale": True, "reasoning": _reason(row, now)}
    event = events.escalation_event(
        task=task, actor=SYSTEM, before=before, target=target, verdict=verdict, **stale
    )
    inbox = None
    if notifies(event):  # the one rule of who is told
        inbox = _values(inbox_item(event), exclude=_PER_TASK)
    return _Outcome(
        task={f: getattr(task, f) for f in _APPLIED_FIELDS},
        event=_values(event, exclude=_PER_TASK | {"reasoning"}),
        inbox=inbox,
        recipient=target,
    )


# What differs between the tasks of one outcome (`created_at` is when the batch is written).
_PER_TASK = {"id", "task_id", "event_id", "created_at"}


def _values(instance: Model, *, exclude: set[str]) -> dict:
    return {
        f.attname: getattr(instance, f.attname)
        for f in instance._meta.concrete_fields
        if f.attname not in exclude
    }


# --- writing a batch ---------------------------------------------------------------------------


def _write(escalated: list[tuple[int, str, _Outcome]], written: datetime) -> None:
    """Write the batch: its tasks, events and inbox items, then the webhook deliveries.

    On PostgreSQL three statements, each taking its rows as one JSON document (`tasks.sql`);
    elsewhere (SQLite, `make run`) the ORM's bulk writes.
    """
    if not escalated:
        return
    if not sql.on_postgresql():
        tasks = [Task(pk=pk, **o.task) for pk, _, o in escalated]
        Task.objects.bulk_update(tasks, list(_APPLIED_FIELDS))
        record_many(
            [o.event_of(pk, why) for pk, why, o in escalated],
            now=written,
            asked={pk for pk, _, o in escalated if o.asks_recipient},
        )
        return
    stamp = _members({"created_at": written})
    reasons = {why: json.dumps(why) for why in {why for _, why, _ in escalated}}
    rows = (f'{{"id":{pk},{o.task_json}}}' for pk, _, o in escalated)
    sql.update_from_json(Task, _array(rows), fields=_APPLIED_FIELDS)
    evs = (
        f'{{"task_id":{pk},"reasoning":{reasons[why]},{stamp},{o.event_json}}}'
        for pk, why, o in escalated
    )
    event_ids = dict(sql.insert_from_json(TaskEvent, _array(evs), returning="task_id, id"))
    items = [
        f'{{"task_id":{pk},"event_id":{event_ids[pk]},{stamp},{o.inbox_json}}}'
        for pk, _, o in escalated
        if o.inbox_json is not None
    ]
    if items:
        sql.insert_from_json(InboxItem, _array(items))
    announce_batch((o.recipient, o.event["kind"], pk) for pk, _, o in escalated if o.asks_recipient)
    hooked = [
        o.event_of(pk, why, pk=event_ids[pk], created_at=written)
        for pk, why, o in escalated
        if o.inbox is not None and o.recipient.webhook_url
    ]
    if hooked:
        # As `event_writer.record_many`: the payloads read the tasks as just written.
        tasks = Task.objects.select_related("organization", "assignee", "queued_for").in_bulk(
            [e.task_id for e in hooked]
        )
        deliveries = WebhookDelivery.objects.bulk_create(
            webhooks.delivery_for(e, tasks[e.task_id], e.recipient) for e in hooked
        )
        webhooks.enqueue_deliveries([d.pk for d in deliveries])


def _members(values: dict) -> str:
    """`values` as the members of a JSON object (no braces), to prefix a task's own."""
    encoded = json.dumps(values, default=_json_default, separators=(",", ":"))
    assert encoded.startswith("{") and len(encoded) > 2, encoded
    return encoded[1:-1]


def _array(objects) -> str:
    return f"[{','.join(objects)}]"


def _json_default(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
