"""Writing a move's event: the audit row, the inbox items, the webhooks and the wake-ups.

`record` writes an event that reaches its recipient, `record_for` one that reaches the people
involved, `record_many` a batch of the sweep's escalations.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from infrastructure.prepared import insert_new
from organization.models import Agent

from . import sql, webhooks
from .models import InboxItem, Task, TaskEvent, WebhookDelivery
from .wakes import announce, announce_batch


def notifies(event: TaskEvent) -> bool:
    """The receiving agent is told (inbox, webhook), never of its own act."""
    recipient = event.recipient
    return recipient is not None and not (
        event.actor_agent_id is not None and event.actor_agent_id == recipient.pk
    )


def inbox_item(event: TaskEvent, agent: Agent | None = None) -> InboxItem:
    """The inbox item of `event` for `agent` (its recipient by default)."""
    return InboxItem(
        organization_id=event.organization_id,
        agent_id=agent.pk if agent is not None else event.recipient_id,
        task_id=event.task_id,
        event=event,
        kind=event.kind,
        message=event.message,
    )


def record(task: Task, event: TaskEvent, *, wake: bool = True) -> TaskEvent:
    """Write the audit row; the recipient gets an inbox item, a webhook and (`wake`) a wake-up."""
    if not notifies(event):
        insert_new(event)  # the ORM would compile the INSERT anew for every event
        return event
    item = inbox_item(event)
    if not sql.insert_event_with_item(event, item):
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


def record_for(
    task: Task,
    event: TaskEvent,
    recipients: Iterable[Agent | None],
    *,
    unwoken: Agent | None = None,
) -> TaskEvent:
    """Write the audit row (no recipient); each of `recipients` but the actor is told once.

    `unwoken` is told but not asked to act (no `work_reached_agent` for it).
    """
    told, seen = [], {event.actor_agent_id}
    for agent in recipients:
        if agent is not None and agent.pk not in seen:
            seen.add(agent.pk)
            told.append(agent)
    if len(told) == 1:
        event.recipient = told[0]
        item = inbox_item(event)
        event.recipient = None
        if sql.insert_event_with_item(event, item):
            _deliver(task, event, told, unwoken)
            return event
    insert_new(event)
    InboxItem.objects.bulk_create(inbox_item(event, agent) for agent in told)
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


def record_many(events: list[TaskEvent], *, now: datetime, asked: set[int]) -> None:
    """Write a batch of events (one per task), their inbox items and webhooks (the stale sweep).

    The recipients of the events of the tasks in `asked` are asked to act; the others are told.
    """
    if not events:
        return
    notified = [e for e in events if notifies(e)]
    if sql.on_postgresql():
        sql.insert_events(events, now)
        sql.insert_inbox_items(notified, now)
    else:
        TaskEvent.objects.bulk_create(events)
        InboxItem.objects.bulk_create(inbox_item(e) for e in notified)
    announce_batch((e.recipient, e.kind, e.task_id) for e in notified if e.task_id in asked)
    hooked = [e for e in notified if e.recipient.webhook_url]
    if not hooked:
        return
    # The webhook payloads read the tasks as the caller has just written them.
    tasks = Task.objects.select_related("organization", "assignee", "queued_for").in_bulk(
        [e.task_id for e in hooked]
    )
    deliveries = WebhookDelivery.objects.bulk_create(
        webhooks.delivery_for(e, tasks[e.task_id], e.recipient) for e in hooked
    )
    webhooks.enqueue_deliveries([d.pk for d in deliveries])
