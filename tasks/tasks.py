"""Celery tasks of the engine: thin, they take ids, call one service and own the retry policy.

Each imports its service inside its body (HackSoft's Celery pattern); the services queue these
tasks by name through `infrastructure.outbox`, so no module of the app imports this one.
"""

import logging

from celery import shared_task
from django.conf import settings

from .apps import DECISIONS_SWEEP_TASK, STALE_SWEEP_TASK, WEBHOOK_SWEEP_TASK
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
            len(result.skipped),
            result.skipped,
        )
    return {"escalated": result.escalated, "skipped": result.skipped}


@shared_task(
    bind=True,
    name=DELIVER_WEBHOOK,
    ignore_result=True,
    # At-least-once, like run_agent and run_session: acked once the attempt is recorded and its
    # retry queued, re-queued if the worker process dies. A copy finds the delivery claimed or
    # done and does nothing; a message lost anyway is the sweep's (sweep_webhook_deliveries).
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
)
def deliver_webhook(self, delivery_id: int) -> None:
    """POST the signed event; retried with exponential backoff, each attempt recorded."""
    from .webhooks import RetryLater, retry_countdown, webhook_deliver

    try:
        webhook_deliver(delivery_id=delivery_id, max_retries=settings.TASKS_WEBHOOK_MAX_RETRIES)
    except RetryLater as exc:
        raise self.retry(exc=exc.error, countdown=retry_countdown(exc.attempts)) from exc.error


@shared_task(name=WEBHOOK_SWEEP_TASK, ignore_result=True)
def sweep_webhook_deliveries() -> dict:
    """Queue again the pending deliveries whose message was lost (scheduled by the beat)."""
    from .webhooks import webhook_sweep

    result = webhook_sweep()
    if result["queued"] or result["failed"]:
        log.warning(
            "Webhook sweep queued again %d lost delivery(ies), failed %d out of attempts",
            result["queued"],
            result["failed"],
        )
    return result


@shared_task(name=DECISIONS_SWEEP_TASK, ignore_result=True)
def sweep_decisions() -> dict:
    """Warn deciders, expire decisions (on_expiry applied), supersede moved ones (the beat's)."""
    from .services import decisions_sweep

    return decisions_sweep()
