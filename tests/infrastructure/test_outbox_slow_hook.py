"""A commit hook slower than its grace (a big batch, a slow broker, a long transaction) shares
its messages with the relay running meanwhile, and each message is still published once.

The broker is a stand-in that takes 0.3 s per publish; the relay runs over and over in its
own thread, on its own connection, as the beat's would."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction

from infrastructure import outbox
from infrastructure.models import OutboxMessage
from tests.conftest import requires_postgres

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NOBODYS_TASK = "tests.outbox.nobody_runs_this"


@pytest.fixture
def slow_broker(settings, monkeypatch):
    settings.OUTBOX_HOOK_GRACE = timedelta(seconds=1)  # OUTBOX_HOOK_GRACE_SECONDS
    published = Counter()
    lock = threading.Lock()

    def send(message):
        time.sleep(0.3)
        with lock:
            published[message.task_id] += 1

    monkeypatch.setattr(outbox, "_send", send)
    return published


@pytest.fixture
def relay_running():
    """The relay, run again and again until the test stops it (or is over)."""
    done = threading.Event()

    def loop():
        try:
            while not done.is_set():
                outbox.relay()
                time.sleep(0.05)
        finally:
            connection.close()

    thread = threading.Thread(target=loop)
    thread.start()

    def stop():
        done.set()
        thread.join(30)

    yield stop
    stop()


def all_published_then_stop(messages, stop_relay):
    """Wait (with a deadline) until each message is marked dispatched, then stop the relay:
    from then on nothing can publish, so the counts are final."""
    ids = [m.pk for m in messages]
    deadline = time.monotonic() + 30
    while OutboxMessage.objects.filter(pk__in=ids, dispatched_at__isnull=True).exists():
        assert time.monotonic() < deadline, "messages left undispatched"
        time.sleep(0.05)
    stop_relay()


def test_a_batch_that_outlasts_the_grace_is_published_once_though_the_relay_runs_meanwhile(
    slow_broker, relay_running
):
    with transaction.atomic():
        messages = outbox.enqueue_many(NOBODYS_TASK, [(n,) for n in range(8)])
    all_published_then_stop(messages, relay_running)
    assert sorted(slow_broker.values()) == [1] * 8
    assert not OutboxMessage.objects.filter(
        pk__in=[m.pk for m in messages], dispatched_at__isnull=True
    ).exists()


def test_messages_of_a_transaction_longer_than_the_grace_are_published_once(
    slow_broker, relay_running
):
    """Written more than a grace before their commit: the hook, or the relay, sends each."""
    with transaction.atomic():
        messages = outbox.enqueue_many(NOBODYS_TASK, [(n,) for n in range(4)])
        time.sleep(1.2)  # the transaction outlasts the grace: this is the test's subject
    all_published_then_stop(messages, relay_running)
    assert sorted(slow_broker.values()) == [1] * 4
    assert not OutboxMessage.objects.filter(
        pk__in=[m.pk for m in messages], dispatched_at__isnull=True
    ).exists()
