"""A run whose database connections are dropped mid-run (pg_terminate_backend: a restart, a
failover) on a real worker: it is resumed, once, not failed; nothing is run twice; and it is not
left `running` until the sweep."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from config.celery import app
from runtime.models import Run
from runtime.services import sweep_runs
from tests.collaboration.conftest import wait_for
from tests.conftest import requires_postgres
from tests.fake_llm import Reply
from tests.runtime.scripts import script

pytestmark = [
    requires_postgres(),
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_pool"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]

OTHER_BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid()"
)


def kill(query: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(pg_terminate_backend(pid)) FROM ({query}) AS found")
        return cursor.fetchone()[0]


@pytest.fixture
def worker():
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
    ):
        yield


def test_a_run_that_lost_its_database_mid_call_is_resumed_once_and_soon(
    cast, fake_llm, worker, settings
):
    settings.RUNTIME_LEASE_SECONDS = 2
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply("first", hang=True), "Indexed.")
    task = cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)
    assert kill(OTHER_BACKENDS) >= 1  # the worker's connection, idle while the model thinks
    dropped_at = time.monotonic()
    fake_llm.release()

    def ended():
        r = Run.objects.get(pk=run.pk)
        if r.is_finished:
            return r
        sweep_runs()  # the beat's job, every RUNTIME_SWEEP_SECONDS
        return None

    run = wait_for(ended, timeout=60, interval=0.5)
    from tests.runtime.test_resume import no_event_twice

    no_event_twice(task)
    took = time.monotonic() - dropped_at
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed"), (run.error, run.outcome)
    assert run.attempts == 2  # resumed once: the sweep's handling is right
    assert [c.answered for c in fake_llm.calls_for(agent="agent-alex")] == [True, True]
    assert took < 30


def test_a_run_that_lost_its_database_is_not_left_running_until_the_sweep(cast, fake_llm, worker):
    """The run hands its lease back on a live connection and the Celery task retries at once
    (its crash handler used to fail again on the dead connection: the task failed, was acked,
    and only the sweep sent the run again, once its lease was stale)."""
    assert settings.RUNTIME_LEASE_SECONDS >= 30  # the default: no sweep within this test
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply("first", hang=True), "Indexed.")
    cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)
    assert kill(OTHER_BACKENDS) >= 1
    fake_llm.release()
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=20, interval=0.2)
    except AssertionError:
        run.refresh_from_db()
        pytest.fail(
            f"run still {run.status} 20 s after its database came back "
            f"(lease {run.lease_token!r} held, attempts {run.attempts})"
        )
