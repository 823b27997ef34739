"""The delivery service, one attempt at a time (the Celery task only adds the retry policy)."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connections

from tasks.models import WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.webhooks import RetryLater, attempt_lease, webhook_deliver
from tests.factories import make_agent, make_org
from tests.tasks.test_webhooks import Receiver

pytestmark = pytest.mark.django_db


def delivery_to(url):
    org = make_org()
    alex = make_agent(org, "agent-alex", webhook_url=url)
    task_create(org=org, actor=SYSTEM, title="Index orders", assignee=alex)
    return WebhookDelivery.objects.get(agent=alex)


def test_a_failed_attempt_is_recorded_and_asks_for_a_retry(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(failures=1) as receiver:
        delivery = delivery_to(receiver.url)
        with pytest.raises(RetryLater) as raised:
            webhook_deliver(delivery_id=delivery.pk, max_retries=3)
        assert raised.value.attempts == 1
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_error) == (
            "pending",
            1,
            "HTTP 500",
        )
        webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 2, 200)


def test_the_last_allowed_attempt_fails_the_delivery_for_good(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(failures=100) as receiver:
        delivery = delivery_to(receiver.url)
        webhook_deliver(delivery_id=delivery.pk, max_retries=0)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 1)


def test_a_refused_address_fails_at_once_and_a_finished_delivery_is_not_sent_again(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    delivery = delivery_to("http://127.0.0.1:9/hook")
    webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", "refused address")
    webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert delivery.attempts == 1


class EndlessReceiver:
    """Answers 200 with a chunked body that goes on, a few bytes every 0.1 s, until stopped."""

    def __init__(self):
        self.stop = threading.Event()
        self.posts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts += 1
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while not receiver.stop.is_set():
                        self.wfile.write(b"2\r\nok\r\n")
                        self.wfile.flush()
                        time.sleep(0.1)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db(transaction=True)
def test_an_attempt_ends_within_its_lease_even_if_the_receiver_never_ends_its_answer(settings):
    """`attempt_lease()` assumes an attempt is over in 4 × timeout + 30 s. httpx's timeout is
    per read, so an answer whose body never ends keeps the attempt (and a Celery worker) busy
    for ever, past its lease: a copy of the message then claims the delivery and POSTs again."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    settings.TASKS_WEBHOOK_TIMEOUT_SECONDS = 0.2
    receiver = EndlessReceiver()
    try:
        org = make_org()
        alex = make_agent(org, "agent-alex", webhook_url=receiver.url)
        task_create(org=org, actor=SYSTEM, title="Index orders", assignee=alex)
        delivery = WebhookDelivery.objects.get(agent=alex)

        def attempt():
            try:
                webhook_deliver(delivery_id=delivery.pk, max_retries=3)
            finally:
                connections.close_all()

        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        worker.join(timeout=attempt_lease().total_seconds() + 1)
        still_running = worker.is_alive()
    finally:
        receiver.close()
    worker.join(timeout=10)
    assert receiver.posts == 1
    assert not still_running, "the attempt outlived its lease (the receiver answered 200 at once)"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_status) == ("delivered", 200)
