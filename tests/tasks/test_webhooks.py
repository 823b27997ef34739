"""Webhooks: a real Celery worker POSTs signed JSON to a real receiver that fails twice, then accepts."""

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tasks.models import WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tests.conftest import requires_postgres
from tests.factories import make_agent, make_org
from tests.tasks.test_sweep import needs_redis


class Receiver:
    """An HTTP server on 127.0.0.1 that answers 500 to the first `failures` POSTs, then 200."""

    def __init__(self, failures: int = 2):
        self.requests: list[tuple[dict, bytes]] = []
        self.times: list[float] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers), body))
                receiver.times.append(time.monotonic())
                self.send_response(500 if len(receiver.requests) <= failures else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def poll(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_signed_delivery_is_retried_with_backoff_until_accepted(settings):
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS = 0.2
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the receiver listens on 127.0.0.1
    org = make_org("hooked")
    with Receiver(failures=2) as receiver:
        alex = make_agent(org, "agent-alex", webhook_url=receiver.url)
        app.control.purge()
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            task = task_create(org=org, actor=SYSTEM, title="Index orders", assignee=alex)
            delivery = WebhookDelivery.objects.get(agent=alex)
            assert poll(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "delivered")
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.response_status, delivery.last_error) == (3, 200, "")
    assert len(receiver.requests) == 3
    for headers, body in receiver.requests:
        expected = hmac.new(org.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Agent-Org-Signature"] == f"sha256={expected}"
    payload = json.loads(receiver.requests[-1][1])
    assert payload["event"] == "task.created"
    assert payload["agent"] == "agent-alex"
    assert payload["task"]["id"] == task.pk and payload["task"]["assignee"] == "agent-alex"
    # Exponential backoff: base 0.2 s, then 0.4 s.
    first_gap, second_gap = (
        b - a for a, b in zip(receiver.times, receiver.times[1:], strict=False)
    )
    assert first_gap >= 0.18 and second_gap >= 0.38, (first_gap, second_gap)


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_delivery_that_never_succeeds_is_marked_failed(settings):
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS = 0.05
    settings.TASKS_WEBHOOK_MAX_RETRIES = 2
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the receiver listens on 127.0.0.1
    org = make_org("unhooked")
    with Receiver(failures=100) as receiver:
        alex = make_agent(org, "agent-alex", webhook_url=receiver.url)
        app.control.purge()
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            task_create(org=org, actor=SYSTEM, title="Doomed", assignee=alex)
            delivery = WebhookDelivery.objects.get(agent=alex)
            assert poll(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "failed")
    delivery.refresh_from_db()
    assert delivery.attempts == 3
    assert delivery.last_error == "HTTP 500"
    assert len(receiver.requests) == 3


def test_no_delivery_for_an_agent_without_webhook_or_for_its_own_act(db):
    org = make_org("quiet")
    alex = make_agent(org, "agent-alex", webhook_url="http://127.0.0.1:9/hook")
    bob = make_agent(org, "agent-bob")
    task_create(org=org, actor=SYSTEM, title="t", assignee=bob)
    from tasks.rules import Actor

    task_create(org=org, actor=Actor("agent", alex.handle, agent=alex), title="t", assignee=alex)
    assert WebhookDelivery.objects.count() == 0
