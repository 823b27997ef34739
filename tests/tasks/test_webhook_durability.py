"""A webhook delivery survives its message: lost (a worker acked it and died), it is sent again
by the beat's sweep; repeated (the outbox and the broker deliver at least once), it is POSTed
once and stays delivered. A real receiver on 127.0.0.1 answers; nothing of HTTP is mocked."""

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings
from django.utils import timezone

from infrastructure import outbox
from infrastructure.models import OutboxMessage
from tasks.models import WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.webhooks import RetryLater, webhook_deliver
from tests.concurrency import run_at_once
from tests.conftest import requires_postgres
from tests.factories import make_agent, make_org
from tests.tasks.test_sweep import ROOT, database_url, stop_process
from tests.tasks.test_webhooks import poll

DELIVER = "tasks.deliver_webhook"


class Receiver:
    """Answers each POST with the next of `answers` (200 once they run out), after `delay`
    seconds; an answer of None never comes (the POST hangs until the receiver is closed)."""

    def __init__(self, answers=(), delay: float = 0.0):
        self.posts: list[str] = []
        self.closing = threading.Event()
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    receiver.posts.append(self.headers["X-Agent-Org-Delivery"])
                    n = len(receiver.posts)
                answer = answers[n - 1] if n <= len(answers) else 200
                if answer is None:
                    receiver.closing.wait(60)
                    return
                time.sleep(delay)
                self.send_response(answer)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def published(monkeypatch):
    """The broker takes every message the outbox sends, and a worker acks it at once: the
    messages are kept here, for the test to run as the worker would, or to lose."""
    messages = []
    monkeypatch.setattr(outbox, "_send", lambda message: messages.append(message))
    return messages


def run_every_beat_job():
    """Every job of the beat schedule the apps seed, run as the beat would."""
    from django.core.management.sql import emit_post_migrate_signal
    from django_celery_beat.models import PeriodicTask

    from config.celery import app

    emit_post_migrate_signal(0, False, "default")
    app.loader.import_default_modules()
    for job in PeriodicTask.objects.filter(enabled=True):
        app.tasks[job.task].apply()


def work(messages):
    """Run the webhook messages published so far, as a worker does, and forget them."""
    from config.celery import app

    todo = [m for m in messages if m.task_name == DELIVER]
    messages.clear()
    for message in todo:
        app.tasks[DELIVER].apply(args=message.args, kwargs=message.kwargs)
    return len(todo)


def a_day_later(monkeypatch, days=1):
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(days=days))


def delivery_to(url):
    org = make_org()
    alex = make_agent(org, "agent-alex", webhook_url=url)
    task_create(org=org, actor=SYSTEM, title="Index orders", assignee=alex)
    return WebhookDelivery.objects.get(agent=alex)


# --- a lost message ------------------------------------------------------------------------


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_a_delivery_whose_message_was_acked_and_lost_is_sent_once_by_the_beat(
    settings, monkeypatch, published
):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver() as receiver:
        delivery = delivery_to(receiver.url)
        published.clear()  # a worker took it, acked it, and died before running it

        a_day_later(monkeypatch)
        run_every_beat_job()
        work(published)
        run_every_beat_job()  # a later sweep finds nothing left to send
        assert work(published) == 0

    delivery.refresh_from_db()
    assert receiver.posts == [str(delivery.pk)]
    assert (delivery.status, delivery.attempts) == ("delivered", 1)


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_a_delivery_whose_worker_was_killed_during_the_post_is_sent_again_once(
    settings, monkeypatch, published
):
    """The worker process is SIGKILLed while the receiver has the POST and has not answered."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(answers=[None]) as receiver:
        delivery = delivery_to(receiver.url)
        published.clear()
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
        }
        env.pop("TEST_DATABASE_NAME", None)
        script = (
            "import django; django.setup(); from tasks.webhooks import webhook_deliver; "
            f"webhook_deliver(delivery_id={delivery.pk}, max_retries=5)"
        )
        worker = subprocess.Popen(
            [sys.executable, "-c", script], cwd=ROOT, env=env, start_new_session=True
        )
        try:
            assert poll(lambda: receiver.posts, timeout=60.0), "the worker never POSTed"
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        finally:
            stop_process(worker)
        assert WebhookDelivery.objects.get(pk=delivery.pk).status == "pending"

        a_day_later(monkeypatch)
        run_every_beat_job()
        work(published)
        run_every_beat_job()
        assert work(published) == 0

    delivery.refresh_from_db()
    assert receiver.posts == [str(delivery.pk)] * 2  # the one killed, the one answered
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_a_worker_acks_a_delivery_only_once_it_is_done_and_gives_it_back_if_it_dies():
    from tasks.tasks import deliver_webhook

    assert deliver_webhook.acks_late and deliver_webhook.reject_on_worker_lost


# --- a repeated message --------------------------------------------------------------------


@requires_postgres()
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_copies_of_one_message_post_once_and_the_delivery_stays_delivered(settings):
    """The first POST is accepted after 0.3 s; any other would be answered 500."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(answers=[200, 500, 500], delay=0.3) as receiver:
        org = make_org()
        alex = make_agent(org, "agent-alex")
        delivery = WebhookDelivery.objects.create(
            organization=org, agent=alex, url=receiver.url, payload={"event": "task.assigned"}
        )

        def attempt():
            try:
                webhook_deliver(delivery_id=delivery.pk, max_retries=5)
            except RetryLater:
                return "retry"
            return "done"

        outcomes = run_at_once([attempt, attempt])
        webhook_deliver(delivery_id=delivery.pk, max_retries=5)  # a late copy
    delivery.refresh_from_db()
    assert receiver.posts == [str(delivery.pk)]
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 1, 200)
    assert outcomes == ["done", "done"]  # no retry asked for either


@pytest.mark.django_db
def test_a_copy_does_nothing_while_an_attempt_holds_the_delivery(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver() as receiver:
        delivery = delivery_to(receiver.url)
        now = timezone.now()
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempts=1, last_attempt_at=now, leased_until=now + timedelta(seconds=50)
        )
        webhook_deliver(delivery_id=delivery.pk, max_retries=5)
    assert receiver.posts == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)


# --- the sweep -----------------------------------------------------------------------------


def queued_again(delivery) -> int:
    return OutboxMessage.objects.filter(task_name=DELIVER, args=[delivery.pk]).count() - 1


@pytest.mark.django_db
def test_the_sweep_leaves_a_delivery_waiting_for_its_retry_alone(settings):
    from tasks.webhooks import retry_countdown, webhook_sweep

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(answers=[500]) as receiver:
        delivery = delivery_to(receiver.url)
        with pytest.raises(RetryLater):
            webhook_deliver(delivery_id=delivery.pk, max_retries=5)
    # Its longest wait, not over yet.
    wait = retry_countdown(settings.TASKS_WEBHOOK_MAX_RETRIES)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        created_at=timezone.now() - timedelta(days=1),
        leased_until=timezone.now() - timedelta(seconds=wait),
    )
    assert webhook_sweep() == {"queued": 0, "failed": 0}
    assert queued_again(delivery) == 0

    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        leased_until=timezone.now() - timedelta(seconds=wait) - timedelta(minutes=2)
    )
    assert webhook_sweep() == {"queued": 1, "failed": 0}
    assert webhook_sweep() == {"queued": 0, "failed": 0}  # once, until it waited again
    assert queued_again(delivery) == 1


@pytest.mark.django_db
def test_the_sweep_fails_a_delivery_whose_last_attempt_died(settings):
    from tasks.webhooks import webhook_sweep

    settings.TASKS_WEBHOOK_MAX_RETRIES = 2
    delivery = delivery_to("http://127.0.0.1:9/hook")
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        attempts=3, leased_until=timezone.now() - timedelta(days=1)
    )
    assert webhook_sweep() == {"queued": 0, "failed": 1}
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", "no answer")
    assert queued_again(delivery) == 0


def test_the_sweep_schedule_is_seeded_once(db):
    from django_celery_beat.models import PeriodicTask

    from tasks.apps import WEBHOOK_SWEEP_NAME, ensure_webhook_sweep_schedule

    ensure_webhook_sweep_schedule()
    ensure_webhook_sweep_schedule()
    task = PeriodicTask.objects.get(name=WEBHOOK_SWEEP_NAME)
    assert task.task == "tasks.sweep_webhook_deliveries"
    assert task.interval.every == int(settings.STALE_CHECK_INTERVAL.total_seconds())
