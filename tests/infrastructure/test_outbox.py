"""The outbox's two paths: the commit hook sends from memory and marks in one statement; the
relay takes what failed at once, and what was never tried only after the hook's grace.

The broker is the configured one (Redis, or the embedded filesystem broker); the task names
published here are not registered, so a worker that later reads them discards them.
"""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from infrastructure import outbox
from infrastructure.models import OutboxMessage

pytestmark = pytest.mark.django_db

NOBODYS_TASK = "tests.outbox.nobody_runs_this"


def test_a_committed_message_is_sent_and_marked_by_one_statement_without_a_lock(
    django_capture_on_commit_callbacks, django_assert_num_queries
):
    with django_capture_on_commit_callbacks() as hooks, transaction.atomic():
        message = outbox.enqueue(NOBODYS_TASK, 7, priority=3)
    with django_assert_num_queries(1) as sent:
        for hook in hooks:
            hook()
    (statement,) = [q["sql"] for q in sent.captured_queries]
    assert statement.startswith("UPDATE") and "FOR UPDATE" not in statement
    message.refresh_from_db()
    assert message.dispatched_at is not None
    assert (message.attempts, message.last_error) == (1, "")


def test_messages_committed_together_are_marked_together(
    django_capture_on_commit_callbacks, django_assert_num_queries
):
    with django_capture_on_commit_callbacks() as hooks, transaction.atomic():
        messages = outbox.enqueue_many(NOBODYS_TASK, [(1,), (2,), (3,)])
    with django_assert_num_queries(1):
        for hook in hooks:
            hook()
    rows = OutboxMessage.objects.filter(pk__in=[m.pk for m in messages])
    assert [(m.attempts, m.dispatched_at is not None) for m in rows] == [(1, True)] * 3


@pytest.mark.parametrize("grace", [30, 5])
def test_the_relay_leaves_a_message_never_tried_to_its_hook_until_the_grace_is_over(
    settings, grace
):
    settings.OUTBOX_HOOK_GRACE = timedelta(seconds=grace)  # OUTBOX_HOOK_GRACE_SECONDS
    # Written, its transaction committed, its hook not run yet (or its process died).
    message = OutboxMessage.objects.create(task_name=NOBODYS_TASK, args=[1])
    assert outbox.relay() == 0
    OutboxMessage.objects.filter(pk=message.pk).update(
        created_at=timezone.now() - timedelta(seconds=grace - 2)
    )
    assert outbox.relay() == 0
    message.refresh_from_db()
    assert (message.dispatched_at, message.attempts) == (None, 0)

    OutboxMessage.objects.filter(pk=message.pk).update(
        created_at=timezone.now() - timedelta(seconds=grace + 1)
    )
    assert outbox.relay() == 1
    message.refresh_from_db()
    assert message.dispatched_at is not None and message.attempts == 1


def test_a_message_whose_send_failed_is_the_relays_at_once():
    """Here the send fails before anything is published (an argument the broker's JSON cannot
    encode, in this process's copy only); a broker that is away fails the same way
    (tests/infrastructure/test_broker_outage.py)."""
    message = OutboxMessage.objects.create(task_name=NOBODYS_TASK, args=[1])
    message.args = [object()]
    assert outbox.dispatch([message]) == 0
    message.refresh_from_db()
    assert message.dispatched_at is None
    assert message.attempts == 1 and "EncodeError" in message.last_error

    assert outbox.relay() == 1  # at once, though it was written a moment ago
    message.refresh_from_db()
    assert message.dispatched_at is not None and message.attempts == 2


def test_a_message_already_sent_by_the_relay_is_not_marked_again_by_a_late_hook(
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks() as hooks, transaction.atomic():
        message = outbox.enqueue(NOBODYS_TASK, 1)
    sent_at = timezone.now() - timedelta(minutes=1)
    OutboxMessage.objects.filter(pk=message.pk).update(dispatched_at=sent_at, attempts=1)
    for hook in hooks:
        hook()
    message.refresh_from_db()
    assert (message.dispatched_at, message.attempts) == (sent_at, 1)
