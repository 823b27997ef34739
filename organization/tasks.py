"""Celery tasks of the organization app: thin, they call one service."""

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(name="organization.relay_outbox", ignore_result=True)
def relay_outbox() -> int:
    """Send the outbox messages that could not be sent at commit (scheduled by the beat)."""
    from infrastructure import outbox

    sent = outbox.relay()
    if sent:
        log.info("Outbox relay sent %d message(s)", sent)
    return sent
