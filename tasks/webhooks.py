"""Webhooks of the tasks engine: the payload an agent's receiver gets, its signature, and delivery.

Each attempt claims its delivery first (a lease), so a message delivered twice POSTs once;
the beat's `webhook_sweep` queues again what a lost message left pending.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from infrastructure import outbox
from organization import webhooks as url_rule
from organization.models import Agent

from .models import DeliveryStatus, Task, TaskEvent, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Agent-Org-Signature"
# The Celery task's name: the outbox queues it by name, so nothing here imports tasks.tasks.
DELIVER_WEBHOOK = "tasks.deliver_webhook"
# The sweep queues again a pending delivery left alone this long past its longest retry wait:
# enough for a busy queue to reach its message first (a copy would do nothing anyway).
SWEEP_GRACE = timedelta(minutes=1)
SWEEP_BATCH = 500
# Workers' clocks differ a little: a retry due on one worker's clock may run on another's.
CLOCK_SKEW = timedelta(seconds=5)


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


def retry_countdown(attempts: int) -> float:
    """Seconds between attempt `attempts` and the next: base × 2^(attempts-1) (10 s, 20 s, …)."""
    return settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempts - 1)


def attempt_lease() -> timedelta:
    """How long an attempt holds its delivery: httpx applies the timeout to the connection, the
    request and the answer each, and the name lookup has none; a margin covers them."""
    return timedelta(seconds=4 * settings.TASKS_WEBHOOK_TIMEOUT_SECONDS + 30)


def _claim(delivery_id: int, max_retries: int) -> WebhookDelivery | None:
    """Take the next attempt of a pending delivery no attempt holds, in one conditional UPDATE;
    None when it is not ours (delivered, failed, out of attempts, or another attempt runs)."""
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        Q(leased_until__isnull=True) | Q(leased_until__lte=now + CLOCK_SKEW),
        pk=delivery_id,
        status=DeliveryStatus.PENDING,
        attempts__lte=max_retries,
    ).update(attempts=F("attempts") + 1, last_attempt_at=now, leased_until=now + attempt_lease())
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("organization").get(pk=delivery_id)


def _record_attempt(delivery: WebhookDelivery, **fields) -> bool:
    """Write what a failed attempt changed, while the delivery is still this attempt's (pending,
    not taken over after its lease); False when it is not."""
    return bool(
        WebhookDelivery.objects.filter(
            pk=delivery.pk, status=DeliveryStatus.PENDING, attempts=delivery.attempts
        ).update(leased_until=timezone.now(), **fields)
    )


def _record_delivered(delivery: WebhookDelivery, response_status: int) -> None:
    # The receiver took it: delivered, whatever an attempt that outlived its lease recorded.
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).exclude(status=DeliveryStatus.DELIVERED).update(
        status=DeliveryStatus.DELIVERED,
        delivered_at=now,
        response_status=response_status,
        last_error="",
        leased_until=now,
    )


def webhook_deliver(*, delivery_id: int, max_retries: int) -> None:
    """POST the signed event once and record the attempt (a pending delivery only, claimed first).

    Raises RetryLater while attempts remain; then, or on a URL the rule refuses, it fails for good.
    """
    delivery = _claim(delivery_id, max_retries)
    if delivery is None:
        return
    body = json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature_of(body, delivery.organization.webhook_secret),
        "X-Agent-Org-Delivery": str(delivery.pk),
        "X-Agent-Org-Event": str(delivery.payload.get("event", "")),
    }
    answered = {}
    try:
        response = url_rule.post(
            delivery.url,
            content=body,
            headers=headers,
            timeout=settings.TASKS_WEBHOOK_TIMEOUT_SECONDS,
        )
        answered["response_status"] = response.status_code
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"HTTP {response.status_code}")
    except url_rule.WebhookRefused as exc:
        # The rule will not change between retries: failed for good.
        log.warning("Webhook delivery %s refused: %s", delivery.pk, exc)
        _record_attempt(delivery, status=DeliveryStatus.FAILED, last_error=exc.outcome)
        return
    except (httpx.HTTPError, DeliveryFailed) as exc:
        # Staff see a coarse outcome (the admin must not tell which internal ports answer);
        # the worker's log keeps the detail.
        log.info("Webhook delivery %s attempt failed: %s: %s", delivery.pk, type(exc).__name__, exc)
        error = str(exc) if isinstance(exc, DeliveryFailed) else url_rule.NO_ANSWER
        if delivery.attempts > max_retries:
            if _record_attempt(
                delivery, status=DeliveryStatus.FAILED, last_error=error, **answered
            ):
                log.warning("Webhook delivery %s failed for good: %s", delivery.pk, error)
            return
        if not _record_attempt(delivery, last_error=error, **answered):
            return  # delivered meanwhile, or another attempt took over after this one's lease
        raise RetryLater(exc, delivery.attempts) from exc
    _record_delivered(delivery, answered["response_status"])


def webhook_sweep(*, batch_size: int = SWEEP_BATCH) -> dict:
    """Queue again every pending delivery whose message was lost; fail those out of attempts.

    Run by the beat (`tasks.sweep_webhook_deliveries`); safe when two sweeps overlap.
    """
    max_retries = settings.TASKS_WEBHOOK_MAX_RETRIES
    wait = timedelta(seconds=retry_countdown(max(max_retries, 1))) + SWEEP_GRACE
    queued, failed, after = 0, 0, 0
    while True:
        now = timezone.now()
        left_alone = Q(leased_until__lt=now - wait) | Q(
            leased_until__isnull=True, created_at__lt=now - wait
        )
        with transaction.atomic():
            batch = list(
                WebhookDelivery.objects.select_for_update(skip_locked=True)
                .filter(left_alone, status=DeliveryStatus.PENDING, pk__gt=after)
                .order_by("pk")
                .values_list("pk", "attempts")[:batch_size]
            )
            if not batch:
                break
            after = batch[-1][0]
            spent = [pk for pk, attempts in batch if attempts > max_retries]
            again = [pk for pk, attempts in batch if attempts <= max_retries]
            # Its last attempt died before recording an answer.
            failed += WebhookDelivery.objects.filter(pk__in=spent).update(
                status=DeliveryStatus.FAILED, last_error=url_rule.NO_ANSWER, leased_until=now
            )
            queued += WebhookDelivery.objects.filter(pk__in=again).update(leased_until=now)
            enqueue_deliveries(again)
        if len(batch) < batch_size:
            break
    return {"queued": queued, "failed": failed}
