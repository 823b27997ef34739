"""The transactional outbox: Celery work is recorded with the write that needs it, then sent.

`enqueue()` inside the service's transaction writes an OutboxMessage row; right after commit the
row is sent to the broker and marked dispatched. If the broker is away the write still succeeds
(the request answers as usual) and the row waits: the beat's relay (`relay()`, every
OUTBOX_RELAY_SECONDS) sends it as soon as the broker is back. Both paths take the row with
SELECT … FOR UPDATE SKIP LOCKED and send only rows not yet dispatched, so a message is sent once;
a crash between the send and the commit can repeat it, which the consumers tolerate (a session
resumes, a webhook delivery is sent only while pending).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from .models import OutboxMessage

log = logging.getLogger(__name__)

# Dispatched rows are kept this long (to see what was sent when), then pruned by the relay.
KEEP_DISPATCHED = timedelta(days=1)
# One quick reconnect per send: enough to replace a pooled connection the broker dropped, short
# enough that a request never waits long on a broker that is away (the relay tries again).
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}
RELAY_BATCH = 100


def enqueue(task_name: str, *args, priority: int | None = None, **kwargs) -> OutboxMessage:
    """Record `task_name(*args, **kwargs)` in the current transaction; it is sent after commit,
    with the broker's `priority` when given (so no task of ours takes a `priority` argument)."""
    return enqueue_many(task_name, [args], priority=priority, **kwargs)[0]


def enqueue_many(
    task_name: str, args_list: list, *, priority: int | None = None, **kwargs
) -> list[OutboxMessage]:
    """One message per argument tuple, written in one statement."""
    messages = OutboxMessage.objects.bulk_create(
        OutboxMessage(task_name=task_name, args=list(args), kwargs=kwargs, priority=priority)
        for args in args_list
    )
    pks = [m.pk for m in messages]
    # robust: a failure here must not turn the committed write into an error; the relay sends.
    transaction.on_commit(partial(dispatch, pks), robust=True)
    return messages


def _broker_down(exc: Exception) -> bool:
    return isinstance(exc, OperationalError | ConnectionError | OSError) or (
        type(exc).__module__.startswith(("redis", "kombu"))
    )


def _send(message: OutboxMessage) -> Exception | None:
    """Publish one locked message and record the outcome on the row; the error if not sent."""
    from celery import current_app

    message.attempts += 1
    task = current_app.tasks.get(message.task_name)
    options = {"retry": True, "retry_policy": PUBLISH_RETRY_POLICY}
    if message.priority is not None:
        options["priority"] = message.priority
    try:
        if task is not None:
            task.apply_async(args=message.args, kwargs=message.kwargs,
                             task_id=str(message.task_id), **options)  # fmt: skip
        else:
            current_app.send_task(message.task_name, args=message.args, kwargs=message.kwargs,
                                  task_id=str(message.task_id), **options)  # fmt: skip
    except Exception as exc:
        message.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        message.save(update_fields=["attempts", "last_error"])
        log.warning(
            "Outbox message %s (%s) not sent, the relay will retry: %s",
            message.pk, message.task_name, message.last_error,
            exc_info=not _broker_down(exc),
        )  # fmt: skip
        return exc
    message.dispatched_at = timezone.now()
    message.last_error = ""
    message.save(update_fields=["attempts", "last_error", "dispatched_at"])
    return None


def _pending(pks: list[int] | None = None):
    rows = OutboxMessage.objects.select_for_update(skip_locked=True).filter(
        dispatched_at__isnull=True
    )
    return rows.filter(pk__in=pks) if pks is not None else rows


def dispatch(pks: list[int]) -> int:
    """Send these messages now (after their transaction committed); returns how many were sent.

    Rows the relay holds at this moment are skipped: it sends them.
    """
    sent = 0
    with transaction.atomic():
        for message in _pending(pks).order_by("pk"):
            error = _send(message)
            if error is None:
                sent += 1
            elif _broker_down(error):
                break  # the relay sends the rest once the broker is back
    return sent


def relay(*, batch_size: int = RELAY_BATCH) -> int:
    """Send every undispatched message, oldest first; stops when the broker is away.

    Run by the beat (`organization.relay_outbox`). Returns how many were sent.
    """
    sent, after = 0, 0
    while True:
        with transaction.atomic():
            batch = list(_pending().filter(pk__gt=after).order_by("pk")[:batch_size])
            for message in batch:
                after = message.pk
                error = _send(message)
                if error is None:
                    sent += 1
                elif _broker_down(error):
                    return sent  # the next run tries again
        if len(batch) < batch_size:
            break
    OutboxMessage.objects.filter(dispatched_at__lt=timezone.now() - KEEP_DISPATCHED).delete()
    return sent
