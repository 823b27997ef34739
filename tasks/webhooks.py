"""Webhooks of the tasks engine: the payload an agent's receiver gets, its signature, and delivery.

`tasks.events` writes a `WebhookDelivery` row with each move that reaches an agent with a
`webhook_url`, and queues it through the outbox (`enqueue_deliveries`). The Celery task
`tasks.deliver_webhook` calls `webhook_deliver` once per attempt and owns the retry policy.
Where a URL may point (the SSRF rule) is `organization.webhooks`, shared with the agent forms.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import httpx
from django.conf import settings
from django.utils import timezone

from organization import outbox
from organization import webhooks as url_rule
from organization.models import Agent

from .models import DeliveryStatus, Task, TaskEvent, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Agent-Org-Signature"
# The Celery task's name: the outbox queues it by name, so nothing here imports tasks.tasks.
DELIVER_WEBHOOK = "tasks.deliver_webhook"


# --- payload and signature ------------------------------------------------------------------


def task_payload(task: Task) -> dict:
    """The task as webhook receivers see it (the API's Task JSON without computed fields)."""
    return {
        "id": task.pk,
        "title": task.title,
        "required_expertise": task.required_expertise,
        "urgency": task.urgency,
        "deadline": task.deadline.isoformat() if task.deadline else None,
        "status": task.status,
        "assignee": task.assignee.handle if task.assignee else None,
        "queued_for": task.queued_for.handle if task.queued_for else None,
        "delegation_chain": list(task.delegation_chain),
        "parent": task.parent_id,
        "result": task.result,
        "result_data": task.result_data,
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


def signature_of(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_for(event: TaskEvent, task: Task, recipient: Agent) -> WebhookDelivery:
    """The (unsaved) delivery of `event` to the recipient's webhook."""
    return WebhookDelivery(
        organization_id=event.organization_id,
        agent=recipient,
        event=event,
        url=recipient.webhook_url,
        payload=webhook_payload(event, task, recipient),
        status=DeliveryStatus.PENDING,
    )


def enqueue_deliveries(ids: list[int]) -> None:
    """Through the outbox: the move commits and answers even while the broker is away."""
    if ids:
        outbox.enqueue_many(DELIVER_WEBHOOK, [(pk,) for pk in ids])


# --- delivery ----------------------------------------------------------------------------------


class DeliveryFailed(Exception):
    """The receiver answered, but not with a 2xx."""


class RetryLater(Exception):
    """The attempt failed and was recorded; another may succeed (`attempts` made so far)."""

    def __init__(self, error: Exception, attempts: int):
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts


def webhook_deliver(*, delivery_id: int, max_retries: int) -> None:
    """POST the signed event once and record the attempt.

    A pending delivery only (a repeated message finds it delivered or failed and does nothing).
    Raises RetryLater while attempts remain; after `max_retries` retries, or when the URL breaks
    the rule (which will not change between retries), the delivery is failed for good.
    """
    delivery = (
        WebhookDelivery.objects.select_related("organization")
        .filter(pk=delivery_id, status=DeliveryStatus.PENDING)
        .first()
    )
    if delivery is None:
        return
    body = json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature_of(body, delivery.organization.webhook_secret),
        "X-Agent-Org-Delivery": str(delivery.pk),
        "X-Agent-Org-Event": str(delivery.payload.get("event", "")),
    }
    delivery.attempts += 1
    delivery.last_attempt_at = timezone.now()
    try:
        response = url_rule.post(
            delivery.url,
            content=body,
            headers=headers,
            timeout=settings.TASKS_WEBHOOK_TIMEOUT_SECONDS,
        )
        delivery.response_status = response.status_code
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"HTTP {response.status_code}")
    except url_rule.WebhookRefused as exc:
        # The rule will not change between retries: failed for good.
        log.warning("Webhook delivery %s refused: %s", delivery.pk, exc)
        delivery.last_error = exc.outcome
        delivery.status = DeliveryStatus.FAILED
        delivery.save()
        return
    except (httpx.HTTPError, DeliveryFailed) as exc:
        # Staff see a coarse outcome (the admin must not tell which internal ports answer);
        # the worker's log keeps the detail.
        log.info("Webhook delivery %s attempt failed: %s: %s", delivery.pk, type(exc).__name__, exc)
        delivery.last_error = str(exc) if isinstance(exc, DeliveryFailed) else url_rule.NO_ANSWER
        if delivery.attempts > max_retries:
            delivery.status = DeliveryStatus.FAILED
            delivery.save()
            log.warning("Webhook delivery %s failed for good: %s", delivery.pk, delivery.last_error)
            return
        delivery.save()
        raise RetryLater(exc, delivery.attempts) from exc
    delivery.status = DeliveryStatus.DELIVERED
    delivery.delivered_at = timezone.now()
    delivery.last_error = ""
    delivery.save()
