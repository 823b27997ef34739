"""Celery tasks of the engine: thin, they take ids, call one service and own the retry policy.

Each imports its service inside its body (HackSoft's Celery pattern); the services queue these
tasks by name through `organization.outbox`, so no module of the app imports this one.
"""

import logging

from celery import shared_task
from django.conf import settings

from .apps import STALE_SWEEP_TASK
from .webhooks import DELIVER_WEBHOOK

log = logging.getLogger(__name__)


@shared_task(name=STALE_SWEEP_TASK, ignore_result=True)
def sweep_stale_tasks() -> dict:
    """Escalate stale queued tasks (scheduled by django-celery-beat, editable in the admin)."""
    from .sweep import sweep_stale_queued

    result = sweep_stale_queued()
    if result.escalated:
        log.info("Stale-queue sweep escalated %d task(s)", result.escalated)
    if result.skipped:
        log.error(
            "Stale-queue sweep skipped %d task(s) that cannot be escalated: %s",
            len(result.skipped), result.skipped,
        )  # fmt: skip
    return {"escalated": result.escalated, "skipped": result.skipped}


@shared_task(bind=True, name=DELIVER_WEBHOOK, ignore_result=True, max_retries=None)
def deliver_webhook(self, delivery_id: int) -> None:
    """POST the signed event; retried with exponential backoff, each attempt recorded."""
    from .webhooks import RetryLater, webhook_deliver

    try:
        webhook_deliver(delivery_id=delivery_id, max_retries=settings.TASKS_WEBHOOK_MAX_RETRIES)
    except RetryLater as exc:
        countdown = settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS * 2 ** (exc.attempts - 1)
        raise self.retry(exc=exc.error, countdown=countdown) from exc.error
