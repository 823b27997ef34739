"""The record of each move: one function per event kind (as saleor's `order/events.py`).

Each writes, in the caller's transaction, the audit row (`TaskEvent`, append-only) and — when
the move reaches an agent other than the one acting — that agent's inbox item and, if it has a
`webhook_url`, a `WebhookDelivery` queued through the outbox. The services call them after
writing the task; `before` is the task's `snapshot()` taken before the move.

Most events reach one agent, the event's `recipient` (the agent that receives the task). A task
finishing, a comment and a parent's subtasks all done reach the people involved instead
(`_record_for`): the event has no recipient, and each of them gets its own inbox item. An inbox
item that asks its agent to act (`signals.WAKING_KINDS`) also sends `work_reached_agent` once the
transaction commits: the hook a managed agent runtime wakes its agents with. A comment only tells
the expert a queued task waits for (it does not hold the task yet): it sends nothing for it.

The stale sweep escalates thousands of tasks at once: it builds the same escalation events
(`escalation_event`) and writes them with `record_many`, a few statements per batch.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from functools import partial

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, transaction

from infrastructure.prepared import INT, TEXT, PreparedQuerySet, column_values, insert_new
from organization.models import Agent

from . import webhooks
from .holds import budget_holds
from .models import (
    FINISHED_STATUSES,
    ActorKind,
    Decision,
    EventKind,
    InboxItem,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
    WebhookDelivery,
)
from .rules import SYSTEM, Actor, Verdict, coordination_note, delegated_by, is_cross_team
from .signals import WAKING_KINDS, work_reached_agent

log = logging.getLogger(__name__)

# How much of a result or a comment an inbox message quotes (the rest is on the task).
EXCERPT_LENGTH = 200


def snapshot(task: Task) -> dict:
    """What the audit row keeps of the task, before and after a move."""
    return {
        "status": task.status,
        "assignee": task.assignee.handle if task.assignee else None,
        "queued_for": task.queued_for.handle if task.queued_for else None,
    }


# --- one function per event kind ----------------------------------------------------------------


def task_created_event(*, task: Task, actor: Actor, assignee: Agent | None) -> TaskEvent:
    who = f" and assigned it to {assignee.handle}" if assignee else " (queued, unassigned)"
    return _record(
        task,
        _event(
            task,
            EventKind.CREATED,
            actor,
            before={},
            recipient=assignee,
            message=f"{actor.label} created the task{who}.",
        ),  # fmt: skip
    )


def task_assigned_event(*, task: Task, actor: Actor, before: dict, to: Agent) -> TaskEvent:
    return _record(
        task,
        _event(
            task,
            EventKind.ASSIGNED,
            actor,
            before,
            recipient=to,
            message=f"{actor.label} assigned the task to {to.handle}.{_held(to)}",
        ),  # fmt: skip
    )


def task_claimed_event(*, task: Task, actor: Actor, before: dict, to: Agent) -> TaskEvent:
    return _record(
        task,
        _event(
            task,
            EventKind.CLAIMED,
            actor,
            before,
            recipient=to,
            message=f"{to.handle} claimed the task.",
        ),  # fmt: skip
    )


def task_auto_assigned_event(*, task: Task, before: dict, to: Agent) -> TaskEvent:
    """The queue's refill: the system gives a queued task to the expert who has room again."""
    return _record(
        task,
        _event(
            task,
            EventKind.AUTO_ASSIGNED,
            SYSTEM,
            before,
            recipient=to,
            message=f"{to.handle} has room again: the queued task is assigned to them.",
        ),  # fmt: skip
    )


def task_delegated_event(
    *, task: Task, actor: Actor, before: dict, to: Agent, **decision
) -> TaskEvent:
    """Seed 001's DELEGATE; `decision` holds the DELEGATION DECISION fields."""
    return _record(
        task,
        _event(
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
        ),  # fmt: skip
    )


def task_queued_event(
    *, task: Task, actor: Actor, before: dict, to: Agent, estimated_wait: int, **decision
) -> TaskEvent:
    """Seed 001's QUEUE; `decision` holds the DELEGATION DECISION fields and the Wait Time."""
    return _record(
        task,
        _event(
            task,
            EventKind.QUEUED,
            actor,
            before,
            recipient=to,
            message=(
                f"{actor.label} queued the task for {to.handle} "
                f"(estimated wait {estimated_wait} s).{_held(to)}"
            ),
            decision=Decision.QUEUE,
            primary_choice=to.handle,
            **decision,
            **_cross_team(actor, to),
        ),  # fmt: skip
    )


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

    `target` None = escalated to humans; otherwise the task went to the target if `verdict` had
    room, else it is queued for them. `stale` words it as the sweep's.
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
    return _event(
        task, EventKind.ESCALATED, actor, before, recipient=target, message=message,
        decision=Decision.ESCALATE, primary_choice=target.handle if target else "", **decision,
    )  # fmt: skip


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
    # Queued for a senior at capacity: told, not asked to act (it cannot take the task yet; the
    # queue's refill that gives it the task wakes it), as for any task queued for an expert.
    return _record(task, event, wake=target is None or task.assignee_id == target.pk)


def task_status_changed_event(
    *, task: Task, actor: Actor, before: dict, note: str = ""
) -> TaskEvent:
    """A status move. A task that ends completed or failed reaches its creator and whoever
    delegated it to its holder (issue 11 §1), with its result quoted. Its holder is told of a
    move someone else (a human) made of the task it holds — told, not woken (rule 8)."""
    message = f"{actor.label}: {before['status']} → {task.status}." + (f" {note}" if note else "")
    event = _event(task, EventKind.STATUS_CHANGED, actor, before, notes=note)
    holder = task.assignee  # `_record_for` never tells the actor: the holder moving its own task
    if task.status not in (TaskStatus.COMPLETED, TaskStatus.FAILED):
        event.message = message
        if holder is None or actor.is_(holder):
            return _record(task, event)
        return _record_for(task, event, [holder])
    if task.result:
        message += f" Result: {excerpt(task.result)}"
    event.message = message
    return _record_for(task, event, [holder, task.created_by_agent, *_delegator(task)])


def task_cancelled_event(
    *, task: Task, actor: Actor, before: dict, reason: str = "", with_parent: Task | None = None,
    waited_for: Agent | None = None,
) -> TaskEvent:  # fmt: skip
    """Cancelled; `with_parent` when it went with the parent task being cancelled. Who was
    working on it or waiting to — its holder, the expert it was queued for (`waited_for`) — and
    the agent that created it are told (an inbox item, a webhook), never asked to act: they stop
    work on it, which their next move would otherwise learn from a 409."""
    message = f"{actor.label} cancelled the task."
    if with_parent is not None:
        message = f"{actor.label} cancelled the task with its parent task #{with_parent.pk}."
    event = _event(
        task, EventKind.CANCELLED, actor, before,
        message=message + (f" {reason}" if reason else ""), reasoning=reason,
    )  # fmt: skip
    holder = task.assignee if before.get("assignee") else None
    return _record_for(task, event, [holder, waited_for, task.created_by_agent])


def task_commented_event(*, task: Task, actor: Actor, comment: TaskComment) -> TaskEvent:
    """A comment reaches the others involved in the task: its holder (or the expert it waits
    for), its creator and whoever delegated it to the holder — never its author. The expert a
    queued task only waits for is told but not woken: it does not hold the task yet, and reads
    the comments when the queue's refill gives it the task (that wakes it)."""
    holder = task.assignee or task.queued_for
    event = _event(
        task,
        EventKind.COMMENT,
        actor,
        snapshot(task),
        message=f"{actor.label} commented on the task: {excerpt(comment.body)}",
    )
    return _record_for(task, event, [holder, task.created_by_agent, *_delegator(task)],
                       unwoken=_only_waited_for(task))  # fmt: skip


def _only_waited_for(task: Task) -> Agent | None:
    """The expert a queued task waits for, unless it is also one who passed the task on (its
    creator, or earlier in its delegation chain): a comment wakes those (docs/runtime.md)."""
    expert = task.queued_for if task.assignee is None else None
    if expert is None or task.created_by_agent_id == expert.pk:
        return None
    passed_on = list(task.delegation_chain)[:-1]
    return None if expert.handle in passed_on else expert


def subtasks_done_event(*, parent: Task, actor: Actor, last: Task, counts: Counter) -> TaskEvent:
    """The last open subtask of `parent` finished (`last`, moved by `actor`): the parent's holder
    is told, with how its subtasks ended (`counts`: status → number)."""
    total = sum(counts.values())
    ended = ", ".join(f"{counts[s]} {s}" for s in FINISHED_STATUSES if counts[s])
    message = (
        f"All {total} subtask(s) of the task are finished ({ended}); the last, "
        f'#{last.pk} "{last.title}", {last.status} by {actor.label}.'
    )
    event = _event(parent, EventKind.SUBTASKS_DONE, actor, snapshot(parent), message=message)
    return _record_for(parent, event, [parent.assignee])


def excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_LENGTH else text[: EXCERPT_LENGTH - 1] + "…"


def _delegator(task: Task) -> list[Agent]:
    """Who passed the task to its holder (or queued it for the expert it waits for): the
    delegation chain's entry before the holder; for a task that waits for humans (nobody holds
    it), the last agent it passed through, who passed it up to them; [] when nobody did (one
    query when somebody)."""
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
    return _AGENT_NAMED.instances(organization_id=task.organization_id, handle=handle)


# Whom a finished task tells besides its creator: read on every completion, compiled once.
_AGENT_NAMED = PreparedQuerySet(
    Agent,
    lambda organization_id, handle: Agent.objects.filter(
        organization_id=organization_id, handle=handle
    ).order_by()[:1],
    organization_id=INT,
    handle=TEXT,
)


# --- building and writing ------------------------------------------------------------------------


def _held(to: Agent) -> str:
    """The sentence a routing to a managed agent a budget holds back adds to its event: the
    work reaches them but waits (`tasks.holds`)."""
    why = budget_holds([to]).get(to.pk)
    return (
        f" {to.handle} is held for budget ({why}): the work waits until it has room." if why else ""
    )


def _cross_team(actor: Actor, to: Agent) -> dict:
    """The event fields of an agent's routing: whether it crosses teams, and the note if so."""
    if not actor.is_agent or not is_cross_team(actor.agent, to):
        return {"cross_team": False}
    return {"cross_team": True, "coordination_note": coordination_note(actor.agent, to)}


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


def _notifies(event: TaskEvent) -> bool:
    """The receiving agent is told (inbox, webhook), never of its own act."""
    recipient = event.recipient
    return recipient is not None and not (
        event.actor_agent_id is not None and event.actor_agent_id == recipient.pk
    )


def _inbox_item(event: TaskEvent, agent: Agent | None = None) -> InboxItem:
    """The inbox item of `event` for `agent` (its recipient by default)."""
    return InboxItem(
        organization_id=event.organization_id,
        agent_id=agent.pk if agent is not None else event.recipient_id,
        task_id=event.task_id,
        event=event,
        kind=event.kind,
        message=event.message,
    )


def _record(task: Task, event: TaskEvent, *, wake: bool = True) -> TaskEvent:
    """Write the audit row of `task`; the recipient gets an inbox item and a webhook, and
    (`wake`) is asked to act."""
    if not _notifies(event):
        insert_new(event)  # the ORM would compile the INSERT anew for every event
        return event
    item = _inbox_item(event)
    if not _insert_together(event, item):
        event.save()
        item.event = event
        item.save()
    if event.recipient.webhook_url:
        delivery = webhooks.delivery_for(event, task, event.recipient)
        delivery.save()
        webhooks.enqueue_deliveries([delivery.pk])
    if wake:
        announce([(event.recipient, event.kind, task)], event=event)
    return event


def _record_for(
    task: Task,
    event: TaskEvent,
    recipients: Iterable[Agent | None],
    *,
    unwoken: Agent | None = None,
) -> TaskEvent:
    """Write the audit row of `task` (no recipient: nobody receives the task through it); each
    of `recipients` but the actor (and the absent ones, once each) gets an inbox item and a
    webhook. `unwoken` is told but not asked to act (`work_reached_agent` is not sent for it)."""
    told, seen = [], {event.actor_agent_id}
    for agent in recipients:
        if agent is not None and agent.pk not in seen:
            seen.add(agent.pk)
            told.append(agent)
    if len(told) == 1:
        event.recipient = told[0]
        item = _inbox_item(event)
        event.recipient = None
        if _insert_together(event, item):
            _deliver(task, event, told, unwoken)
            return event
    insert_new(event)
    InboxItem.objects.bulk_create(_inbox_item(event, agent) for agent in told)
    _deliver(task, event, told, unwoken)
    return event


def _deliver(task: Task, event: TaskEvent, told: list[Agent], unwoken: Agent | None) -> None:
    hooked = [agent for agent in told if agent.webhook_url]
    if hooked:
        deliveries = WebhookDelivery.objects.bulk_create(
            webhooks.delivery_for(event, task, agent) for agent in hooked
        )
        webhooks.enqueue_deliveries([d.pk for d in deliveries])
    asked = [agent for agent in told if unwoken is None or agent.pk != unwoken.pk]
    announce([(agent, event.kind, task) for agent in asked], event=event)


def announce(reached: Iterable[tuple[Agent, str, Task]], *, event: TaskEvent | None = None) -> None:
    """Send `work_reached_agent` for each (agent, inbox kind, task) that asks its agent to act,
    once the transaction commits (nothing is queued while nobody listens). `event` is the audit
    row that reached them (it tells, after the commit, whether its savepoint was undone).

    What one transaction announces is sent together (`WakeBatch`): an agent that many tasks
    reach at once — a batch of tasks created for it — is woken once for all of them."""
    if not work_reached_agent.has_listeners(Task):
        return
    waking = [(agent, kind, task) for agent, kind, task in reached if kind in WAKING_KINDS]
    if not waking:
        return
    if not connection.in_atomic_block:
        _send_all(waking)  # autocommit: committed already
        return
    batch = WakeBatch.of_this_transaction()
    first = batch.add(waking, event_id=event.pk if event is not None and connection.savepoint_ids
                      else None)  # fmt: skip
    transaction.on_commit(partial(batch.send, first), robust=True)


class WakeBatch:
    """The wake-ups one transaction announced, sent once it commits by the first of their
    commit hooks to run, from that hook's own on (each announce registers one, so one survives
    whatever savepoint is undone; the others find the batch sent). Django runs the hooks in the
    order they were made, and undoing a savepoint drops the latest ones, then starts a new list
    (and so a new batch): the first hook to run is the batch's first, but where a test runs only
    the hooks of a block (`captureOnCommitCallbacks`).

    An announce made inside a savepoint that was then undone must not wake anyone: Django drops
    that announce's hook, but the batch still holds its wake-up. So a batch of several checks,
    in one query, that the audit rows of its announces made inside savepoints exist; a batch of
    one needs no check (its own hook ran). A batch of several is sent in one transaction, so
    what the receivers write commits together: the runtime's runs are sent to the workers at
    its end, each with every task that reached its agent."""

    def __init__(self, hooks: list):
        self.hooks = hooks  # the connection's commit hooks when the batch began
        self.reached: list[tuple[Agent, str, Task, int | None]] = []
        self.sent = False

    @classmethod
    def of_this_transaction(cls) -> WakeBatch:
        # Django replaces its list of commit hooks when a transaction ends (commit or rollback)
        # and when a savepoint is undone: a batch made under another list is not this one's.
        batch = getattr(connection, "agent_org_wake_batch", None)
        if batch is None or batch.sent or batch.hooks is not connection.run_on_commit:
            batch = connection.agent_org_wake_batch = cls(connection.run_on_commit)
        return batch

    def add(self, waking: list[tuple[Agent, str, Task]], *, event_id: int | None) -> int:
        """Add an announce's wake-ups; returns where they start in the batch."""
        first = len(self.reached)
        self.reached += [(agent, kind, task, event_id) for agent, kind, task in waking]
        return first

    def send(self, first: int) -> None:
        if self.sent:
            return
        self.sent = True
        reached = self.reached[first:]
        if len(reached) > 1:
            unsure = {e for *_, e in reached if e is not None}
            if unsure:
                kept = set(TaskEvent.objects.filter(pk__in=unsure).values_list("pk", flat=True))
                reached = [r for r in reached if r[3] is None or r[3] in kept]
        waking = [(agent, kind, task) for agent, kind, task, _ in reached]
        if len(waking) <= 1:
            _send_all(waking)
            return
        try:
            # The agents' rows are locked in one order by every batch: no two batches deadlock.
            with transaction.atomic():
                _send_all(sorted(waking, key=lambda r: r[0].pk))
        except DatabaseError:
            # Its commit failed (the receivers' own errors are caught by send_robust): nothing
            # of it was written, so each goes on its own, as a single announce does.
            log.warning("a batch of %d wake-ups failed to commit; sending each", len(waking),
                        exc_info=True)  # fmt: skip
            _send_all(waking)


def _send_all(waking: list[tuple[Agent, str, Task]]) -> None:
    for agent, kind, task in waking:
        work_reached_agent.send_robust(Task, agent=agent, trigger=kind, task=task)


def announce_batch(reached: Iterable[tuple[Agent, str, int]]) -> None:
    """`announce` for a batch — (agent, inbox kind, task id) of each event that reached its
    recipient (the stale sweep) — with one commit hook for all, and nothing while nobody
    listens. Each task goes as a deferred instance: its id, any other field read from the
    database when first used (Django's deferred loading); most receivers read only the id (the
    runtime, and only for managed agents), and the sweep's 2,000 tasks a batch are not read."""
    if not work_reached_agent.has_listeners(Task):
        return
    waking = [(agent, kind, task_id) for agent, kind, task_id in reached if kind in WAKING_KINDS]
    if waking:
        transaction.on_commit(partial(_send_each, waking))


def _send_each(reached: list[tuple[Agent, str, int]]) -> None:
    for agent, kind, task_id in reached:
        task = Task.from_db(DEFAULT_DB_ALIAS, ["id"], [task_id])
        work_reached_agent.send_robust(Task, agent=agent, trigger=kind, task=task)


def _insert_values(obj) -> dict[str, object] | None:
    """Column → parameter of `obj`'s INSERT as `Model.save()` makes it (pre_save fills
    auto_now_add; values prepared for the database); None if a value is an expression."""
    fields = [f for f in obj._meta.local_concrete_fields if not (f.primary_key or f.generated)]
    values = column_values(obj, fields, add=True, connection=connection)
    return None if values is None else {f.column: v for f, v in zip(fields, values, strict=True)}


def _insert_together(event: TaskEvent, item: InboxItem) -> bool:
    """On PostgreSQL, insert the audit row and its inbox item in one statement: a data-modifying
    CTE, the item taking the event's new id. False where that cannot be done (the caller then
    saves each); rows are only ever inserted, as `TaskEvent.save` requires."""
    if connection.vendor != "postgresql":
        return False
    event_values, item_values = _insert_values(event), _insert_values(item)
    if event_values is None or item_values is None:
        return False
    qn = connection.ops.quote_name
    event_id = InboxItem._meta.get_field("event").column
    del item_values[event_id]
    sql = (
        f"WITH e AS (INSERT INTO {qn(TaskEvent._meta.db_table)} ({_columns(event_values)}) "
        f"VALUES ({_placeholders(event_values)}) RETURNING {qn(TaskEvent._meta.pk.column)} AS id) "
        f"INSERT INTO {qn(InboxItem._meta.db_table)} ({_columns(item_values)}, {qn(event_id)}) "
        f"SELECT {_placeholders(item_values)}, e.id FROM e "
        f"RETURNING {qn(InboxItem._meta.pk.column)}, {qn(event_id)}"
    )  # every value is a parameter; the names are our models'
    with connection.cursor() as cursor:
        cursor.execute(sql, [*event_values.values(), *item_values.values()])
        item.pk, event.pk = cursor.fetchone()
    for obj in (event, item):
        obj._state.adding, obj._state.db = False, connection.alias
    item.event = event
    return True


def _columns(values: dict) -> str:
    return ", ".join(connection.ops.quote_name(c) for c in values)


def _placeholders(values: dict) -> str:
    return ", ".join(["%s"] * len(values))


def record_many(events: list[TaskEvent], *, now: datetime, asked: set[int]) -> None:
    """Write a batch of events (one per task), their inbox items and webhooks (the stale sweep);
    the recipients of the events of the tasks in `asked` are asked to act (the others are told).

    On PostgreSQL two `INSERT … SELECT FROM unnest(arrays)`: Django's bulk_create compiles a
    placeholder per value, which costs more than the insert itself at this size. The webhook
    payloads read the tasks as the caller has just written them (one query, only if any).
    """
    if not events:
        return
    notified = [e for e in events if _notifies(e)]
    if connection.vendor == "postgresql":
        _insert_events(events, now)
        _insert_inbox_items(notified, now)
    else:
        TaskEvent.objects.bulk_create(events)
        InboxItem.objects.bulk_create(_inbox_item(e) for e in notified)
    announce_batch((e.recipient, e.kind, e.task_id) for e in notified if e.task_id in asked)
    hooked = [e for e in notified if e.recipient.webhook_url]
    if not hooked:
        return
    tasks = Task.objects.select_related("organization", "assignee", "queued_for").in_bulk(
        [e.task_id for e in hooked]
    )
    deliveries = WebhookDelivery.objects.bulk_create(
        webhooks.delivery_for(e, tasks[e.task_id], e.recipient) for e in hooked
    )
    webhooks.enqueue_deliveries([d.pk for d in deliveries])


# What `_insert_events` writes besides the columns every event has: an escalation by the system.
# Any other field set on a batched event would be lost, so `_insert_events` refuses it.
_UNBATCHED = ("actor_agent_id", "actor_user_id", "primary_reason", "fallback", "notes",
              "wait_time_seconds", "coordination_note", "cross_team")  # fmt: skip


def _insert_events(events: list[TaskEvent], now: datetime) -> None:
    """Insert the events (the system's, as the sweep makes them) in one statement; set their pks."""
    if any(getattr(e, f) for e in events for f in _UNBATCHED):
        raise ValueError(f"Batched events carry none of {', '.join(_UNBATCHED)}.")
    for e in events:
        e.created_at = now
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TaskEvent._meta.db_table} (
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
            """,  # noqa: S608  (the table name is ours, every value is a parameter)
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
        ids = {task_id: pk for pk, task_id in cursor.fetchall()}
    for e in events:
        e.pk = ids[e.task_id]


def _insert_inbox_items(events: list[TaskEvent], now: datetime) -> None:
    if not events:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {InboxItem._meta.db_table}
                (organization_id, agent_id, task_id, event_id, kind, message, read_at, created_at)
            SELECT v.org, v.agent, v.task, v.event, v.kind, v.message, NULL, %s
            FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
                        %s::varchar[], %s::text[]) AS v(org, agent, task, event, kind, message)
            """,  # noqa: S608  (the table name is ours, every value is a parameter)
            [
                now,
                [e.organization_id for e in events],
                [e.recipient_id for e in events],
                [e.task_id for e in events],
                [e.pk for e in events],
                [e.kind for e in events],
                [e.message for e in events],
            ],
        )
