"""The transactional outbox: Celery work is recorded with the write that needs it, then sent.

`enqueue()` inside the service's transaction writes an OutboxMessage row; right after commit the
transaction's hook sends it to the broker from memory and marks it dispatched (one UPDATE). If the
broker is away the write still succeeds (the request answers as usual) and the row waits, its
failed attempt recorded: the beat's relay (`relay()`, every OUTBOX_RELAY_SECONDS) sends it as soon
as the broker is back, taking rows with SELECT … FOR UPDATE SKIP LOCKED.

A row never tried is its hook's for OUTBOX_HOOK_GRACE_SECONDS (30 by default) after it was
written: the relay leaves it alone meanwhile, so the hook needs no lock nor read (a locked read, a
save and a transaction of their own cost three times the send), and the two never send one
message together. The relay takes it after that if its process died before the hook ran. A
hook that runs longer than a third of the grace (a big batch, a slow broker) marks what it sent
so far and holds the rest for another grace, moving their `created_at` on (two statements, on
that slow path only), so the relay takes neither a message the hook sent nor one it has still
to send. A single publish slower than two thirds of the grace, or a crash between a send and
its mark, can still send a message twice, which the consumers tolerate (a session resumes, a
run is claimed once, a webhook delivery is claimed by one attempt).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError

from . import tracing
from .models import OutboxMessage
from .prepared import insert_new

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
    """One message per argument tuple, written in one statement (compiled once for one)."""
    trace_context = tracing.carrier()
    messages = [
        OutboxMessage(
            task_name=task_name,
            args=list(args),
            kwargs=kwargs,
            priority=priority,
            trace_context=trace_context,
        )
        for args in args_list
    ]
    if len(messages) == 1:
        insert_new(messages[0])
    else:
        messages = OutboxMessage.objects.bulk_create(messages)
    # robust: a failure here must not turn the committed write into an error; the relay sends.
    transaction.on_commit(partial(dispatch, messages), robust=True)
    return messages


def _broker_down(exc: Exception) -> bool:
    return isinstance(exc, OperationalError | ConnectionError | OSError) or (
        type(exc).__module__.startswith(("redis", "kombu"))
    )


def _send(message: OutboxMessage) -> Exception | None:
    """Publish one message; the error if it was not sent (logged), else None."""
    from celery import current_app

    task = current_app.tasks.get(message.task_name)
    options = {"retry": True, "retry_policy": PUBLISH_RETRY_POLICY}
    if message.priority is not None:
        options["priority"] = message.priority
    try:
        with tracing.restored(message.trace_context):
            _publish(message, task, options)
    except Exception as exc:
        log.warning(
            "Outbox message %s (%s) not sent, the relay will retry: %s",
            message.pk,
            message.task_name,
            _error_text(exc),
            exc_info=not _broker_down(exc),
        )
        return exc
    return None


def _publish(message: OutboxMessage, task, options: dict) -> None:
    from celery import current_app

    if task is not None:
        task.apply_async(
            args=message.args, kwargs=message.kwargs, task_id=str(message.task_id), **options
        )
    else:
        current_app.send_task(
            message.task_name,
            args=message.args,
            kwargs=message.kwargs,
            task_id=str(message.task_id),
            **options,
        )


def waiting_in_broker() -> int | None:
    """How many messages wait in the broker's default queue; None when the broker cannot say
    (it is away)."""
    from celery import current_app
    from kombu.exceptions import ChannelError

    try:
        with current_app.connection_for_read() as conn:
            queue = current_app.conf.task_default_queue
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
    except ChannelError:
        return 0  # Redis drops an empty queue's key: nothing waits
    except Exception as exc:
        if _broker_down(exc):
            return None
        raise


def _error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _record_failure(pks: list[int], exc: Exception) -> None:
    """The messages were tried and not sent: the relay takes them at its next run."""
    OutboxMessage.objects.filter(pk__in=pks, dispatched_at__isnull=True).update(
        attempts=F("attempts") + 1, last_error=_error_text(exc)
    )


def dispatch(messages: list[OutboxMessage]) -> int:
    """Send these messages now (their transaction committed), then mark those sent in one
    statement; returns how many were sent. When the broker is away the rest are not tried: all
    are marked failed, and the relay sends them once it is back. A batch that takes longer than
    a third of the hook's grace marks and holds as it goes (`_hold`)."""
    pending = list(messages)
    sent, count, n = [], 0, 0
    every = settings.OUTBOX_HOOK_GRACE / 3
    # The grace runs from the rows' writing, so a long transaction has used some of it already.
    hold_at = min((m.created_at for m in pending if m.created_at), default=timezone.now()) + every
    while n < len(pending):
        if timezone.now() >= hold_at:
            count += _mark_sent(sent)
            sent, pending, n = [], _hold(pending[n:]), 0
            hold_at = timezone.now() + every
            continue
        message = pending[n]
        error = _send(message)
        if error is None:
            sent.append(message.pk)
        elif _broker_down(error):
            _record_failure([m.pk for m in pending[n:]], error)
            break
        else:
            _record_failure([message.pk], error)
        n += 1
    return count + _mark_sent(sent)


def _hold(messages: list[OutboxMessage]) -> list[OutboxMessage]:
    """Keep the messages this hook has still to send from the relay for another grace (the
    relay takes a row never tried only once its `created_at` is older than the grace); the
    ones the relay has taken meanwhile are its own, and are left out of what is returned."""
    mine = OutboxMessage.objects.filter(
        pk__in=[m.pk for m in messages], dispatched_at__isnull=True, attempts=0
    )
    # A row the relay holds locked is waited for; once it commits, the row is no longer ours.
    mine.update(created_at=timezone.now())
    held = set(mine.values_list("pk", flat=True))
    return [m for m in messages if m.pk in held]


def _mark_sent(pks: list[int]) -> int:
    """Mark these messages sent; returns how many they are (none: no statement)."""
    if not pks:
        return 0
    # The hook's one statement, written out: the ORM's compiling of this UPDATE cost as much CPU
    # as the publish itself. A row the relay sent meanwhile keeps its own mark.
    meta, qn = OutboxMessage._meta, connection.ops.quote_name
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(meta.db_table)} SET dispatched_at = %s, attempts = attempts + 1, "  # noqa: S608
            f"last_error = '' WHERE {qn(meta.pk.column)} IN ({marks}) AND dispatched_at IS NULL",
            [timezone.now(), *pks],
        )
    return len(pks)


def _relay_send(message: OutboxMessage) -> Exception | None:
    """Send one message the relay holds locked, and record the outcome on its row."""
    error = _send(message)
    message.attempts += 1
    message.last_error = "" if error is None else _error_text(error)
    fields = ["attempts", "last_error"]
    if error is None:
        message.dispatched_at = timezone.now()
        fields.append("dispatched_at")
    message.save(update_fields=fields)
    return error


def relay(*, batch_size: int = RELAY_BATCH) -> int:
    """Send every undispatched message, oldest first; stops when the broker is away.

    Run by the beat (`organization.relay_outbox`). Returns how many were sent.
    """
    sent, after = 0, 0
    while True:
        # Tried before, or older than its commit hook's grace: never one a hook is sending now.
        theirs = Q(attempts__gt=0) | Q(created_at__lt=timezone.now() - settings.OUTBOX_HOOK_GRACE)
        with transaction.atomic():
            batch = list(
                OutboxMessage.objects.select_for_update(skip_locked=True)
                .filter(theirs, dispatched_at__isnull=True, pk__gt=after)
                .order_by("pk")[:batch_size]
            )
            for message in batch:
                after = message.pk
                error = _relay_send(message)
                if error is None:
                    sent += 1
                elif _broker_down(error):
                    return sent  # the next run tries again
        if len(batch) < batch_size:
            break
    OutboxMessage.objects.filter(dispatched_at__lt=timezone.now() - KEEP_DISPATCHED).delete()
    return sent
