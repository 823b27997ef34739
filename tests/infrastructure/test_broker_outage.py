"""Work is never lost when the broker is away: a real TCP proxy in front of Redis is stopped and
started, a real `celery worker -B` (subprocess) works through it, and the requests of this process
publish through it too.
"""

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from collaboration.models import CollaborationSession
from infrastructure.models import OutboxMessage
from organization.apps import OUTBOX_RELAY_NAME, ensure_outbox_relay_schedule
from tasks.models import WebhookDelivery
from tests.broker_proxy import BrokerProxy
from tests.collaboration.conftest import human, specialists, wait_for
from tests.conftest import KeyClient, requires_postgres
from tests.factories import make_agent, make_key, make_org
from tests.fake_llm import FakeLLM, Reply
from tests.tasks.test_sweep import database_url, needs_redis, stop_process
from tests.tasks.test_webhooks import Receiver

pytestmark = [
    requires_postgres(),
    needs_redis,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(__file__).resolve().parents[2]
WORKER_APP_NAME = "outage-test-celery-worker"


@contextmanager
def publishing_through(url: str):
    """Point this process' Celery app (what the views publish with) at `url`, then back."""
    import kombu.pools

    from config.celery import app

    def drop_pools():
        # kombu keeps one pool per broker URL in a process-wide registry: closing the app's pool
        # alone would leave a closed pool registered for the original URL, which later tests
        # publishing in this process would get back ("Acquire on closed pool").
        kombu.pools.reset()
        app._after_fork()  # forgets the connection and producer pools

    # The Django settings namespace: the key that `app.conf.broker_url` reads first.
    saved = app.conf["CELERY_BROKER_URL"]
    drop_pools()
    app.conf["CELERY_BROKER_URL"] = url
    try:
        yield app
    finally:
        drop_pools()
        app.conf["CELERY_BROKER_URL"] = saved


@pytest.fixture
def proxy():
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with BrokerProxy(settings.REDIS_URL) as proxy, publishing_through(proxy.url):
        yield proxy


def worker_sessions() -> list:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s",
            [WORKER_APP_NAME],
        )
        return cursor.fetchall()


@pytest.fixture
def worker(proxy, tmp_path):
    """start(**env) → a `celery worker -B` on the proxy and the test database; stopped for sure."""
    processes = []
    log_path = tmp_path / "worker.log"

    def start(**extra_env):
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": proxy.url,
            "PGAPPNAME": WORKER_APP_NAME,
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
            "LLM_PROVIDER": "offline",
            **extra_env,
        }
        env.pop("TEST_DATABASE_NAME", None)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "-B", "--pidfile", ""]
                + "-P threads -c 2 -l info --without-gossip --without-mingle".split()
                + ["--schedule", str(tmp_path / "beat-schedule")],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        processes.append(process)
        wait_for(lambda: "ready." in log_path.read_text(errors="replace"), timeout=60)
        return process

    start.log = lambda: log_path.read_text(errors="replace")
    yield start
    for process in processes:
        stop_process(process)
    deadline = time.monotonic() + 10
    while worker_sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert worker_sessions() == [], "the stopped worker still holds the test database"


@pytest.fixture
def relay_every_second():
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    ensure_outbox_relay_schedule()
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.filter(name=OUTBOX_RELAY_NAME).update(interval=every_second, enabled=True)


def test_writes_made_while_the_broker_is_away_answer_as_usual_and_their_work_is_done_once(
    proxy, worker, relay_every_second
):
    org = make_org("outage")
    client = KeyClient(make_key(org))
    with Receiver(failures=0) as receiver:
        make_agent(org, "agent-alex", webhook_url=receiver.url)
        process = worker()
        # While the broker is up, a write's work is sent right after its commit.
        steady = client.post(
            "/api/collaborations",
            {"task": "Warm up", "agents": specialists("a"), "synthesis": "merge"},
            format="json",
        )
        assert steady.status_code == 202
        sent = OutboxMessage.objects.get()
        assert sent.dispatched_at is not None and sent.attempts == 1
        wait_for(lambda: CollaborationSession.objects.get(pk=steady.json()["id"]).is_finished, 60)
        sent.delete()

        proxy.stop()

        started = time.monotonic()
        collab = client.post(
            "/api/collaborations",
            {"task": "Choose a cache", "agents": specialists("a", "b"), "synthesis": "merge"},
            format="json",
        )
        created = client.post(
            "/api/tasks", {"title": "Index orders", "agent_id": "agent-alex"}, format="json"
        )
        assert collab.status_code == 202, collab.content[:500]
        assert created.status_code == 201, created.content[:500]
        assert time.monotonic() - started < 15  # no request hangs on the missing broker
        session_id = collab.json()["id"]
        delivery = WebhookDelivery.objects.get(event__task_id=created.json()["id"])
        # Recorded with the writes, not sent: the send after commit failed.
        pending = list(OutboxMessage.objects.filter(dispatched_at__isnull=True))
        assert sorted(m.task_name for m in pending) == [
            "collaboration.run_session",
            "tasks.deliver_webhook",
        ]
        assert all(m.attempts == 1 and m.last_error for m in pending)
        assert CollaborationSession.objects.get(pk=session_id).status == "queued"

        proxy.start()
        # The beat's relay sends them once the broker is back; the worker does the work.
        session = wait_for(
            lambda: (s := CollaborationSession.objects.get(pk=session_id)).is_finished and s,
            timeout=90,
            interval=0.2,
        )
        wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "delivered", 30)
        assert process.poll() is None, worker.log()[-3000:]

    assert session.status == "completed", worker.log()[-3000:]
    assert session.attempts == 1  # run once, never re-run
    assert len(receiver.requests) == 1  # delivered once
    for message in OutboxMessage.objects.all():
        assert message.dispatched_at is not None
        assert message.attempts == 2  # the failed send at commit, then the relay's
        assert worker.log().count(f"[{message.task_id}] received") == 1, message.task_name


OUTAGE_SECONDS = 22


def test_a_worker_survives_a_broker_outage_while_a_session_runs_and_consumes_work_after_it(
    proxy, worker
):
    org = make_org("survivor")
    with FakeLLM() as fake:
        # The first session's agent answers only after the outage is over.
        fake.on(
            contains="long job", replies=Reply("slow\nCONFIDENCE: 0.5", delay=OUTAGE_SECONDS + 8)
        )
        llm = {**fake.env(), "LLM_PROVIDER": "openai", "LLM_MODEL": "fake-model"}
        process = worker(**llm)
        first = CollaborationSession.objects.get(pk=_start(org, "the long job", "slow").pk)
        wait_for(lambda: fake.calls_for(agent="slow"), timeout=60)

        proxy.stop()
        deadline = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < deadline:  # the outage itself; the worker must stay up
            assert process.poll() is None, worker.log()[-3000:]
            time.sleep(0.5)
        proxy.start()

        second = _start(org, "a quick job", "quick")
        wait_for(
            lambda: CollaborationSession.objects.get(pk=second.pk).is_finished,
            timeout=60,
            interval=0.2,
        )
        wait_for(
            lambda: CollaborationSession.objects.get(pk=first.pk).is_finished,
            timeout=60,
            interval=0.2,
        )
        assert process.poll() is None, worker.log()[-3000:]
    log = worker.log()
    assert "Unrecoverable error" not in log, log[-3000:]
    assert CollaborationSession.objects.get(pk=second.pk).status == "completed", log[-3000:]
    assert CollaborationSession.objects.get(pk=first.pk).status == "completed", log[-3000:]


def _start(org, task, agent):
    from collaboration.services import session_create

    return session_create(
        caller=human(org),
        payload={"task": task, "agents": specialists(agent), "synthesis": "merge"},
    )
