"""Celery tasks of the engine: thin, they take ids and call one service."""

import hashlib
import hmac
import json
import logging

import httpx
from celery import shared_task
from django.conf import settings
from django.utils import timezone

from organization import webhooks

from .models import DeliveryStatus, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Agent-Org-Signature"


@shared_task(name="tasks.sweep_stale_tasks", ignore_result=True)
def sweep_stale_tasks() -> dict:
    """Escalate stale queued tasks (scheduled by django-celery-beat, editable in the admin)."""
    from .services import sweep_stale_queued

    result = sweep_stale_queued()
    if result.escalated:
        log.info("Stale-queue sweep escalated %d task(s)", result.escalated)
    if result.skipped:
        log.error(
            "Stale-queue sweep skipped %d task(s) that cannot be escalated: %s",
            len(result.skipped), result.skipped,
        )  # fmt: skip
    return {"escalated": result.escalated, "skipped": result.skipped}


def signature_of(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class DeliveryFailed(Exception):
    pass


@shared_task(bind=True, name="tasks.deliver_webhook", ignore_result=True, max_retries=None)
def deliver_webhook(self, delivery_id: int) -> None:
    """POST the signed event; retried with exponential backoff, each attempt recorded."""
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
        response = webhooks.post(
            delivery.url,
            content=body,
            headers=headers,
            timeout=settings.TASKS_WEBHOOK_TIMEOUT_SECONDS,
        )
        delivery.response_status = response.status_code
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"HTTP {response.status_code}")
    except webhooks.WebhookRefused as exc:
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
        delivery.last_error = str(exc) if isinstance(exc, DeliveryFailed) else webhooks.NO_ANSWER
        if delivery.attempts > settings.TASKS_WEBHOOK_MAX_RETRIES:
            delivery.status = DeliveryStatus.FAILED
            delivery.save()
            log.warning("Webhook delivery %s failed for good: %s", delivery.pk, delivery.last_error)
            return
        delivery.save()
        countdown = settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS * 2 ** (delivery.attempts - 1)
        raise self.retry(exc=exc, countdown=countdown) from exc
    delivery.status = DeliveryStatus.DELIVERED
    delivery.delivered_at = timezone.now()
    delivery.last_error = ""
    delivery.save()
