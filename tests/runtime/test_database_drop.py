"""A run whose database connections are dropped (pg_terminate_backend: a restart, a failover)
on a real worker. While its model thinks the run holds no connection, so a restart then costs it
nothing; one cut in the middle of its statement hands the run back, and it is resumed once and
soon — not failed, not left `running` until the sweep — with nothing run twice."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from config.celery import app
from runtime.models import Run
from tests.collaboration.conftest import wait_for
from tests.conftest import requires_postgres
from tests.db_cut import cut_when_blocked, kill
from tests.fake_llm import Reply
from tests.runtime.scripts import script
from tests.runtime.test_resume import no_event_twice

pytestmark = [
    requires_postgres(),
    pytest.mark.postgres,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_pool"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]


@pytest.fixture
def worker():
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
    ):
        yield


def started_and_thinking(cast, fake_llm) -> tuple:
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply("first", hang=True), "Indexed.")
    task = cast.assign(cast.alex)
    wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)
    return task, Run.objects.get(agent=cast.alex)


def test_a_restart_while_the_model_thinks_costs_the_run_nothing(cast, fake_llm, worker):
    """Every connection is dropped during the model call: the run held none, so it goes on in
    the same attempt, its call made once."""
    task, run = started_and_thinking(cast, fake_llm)
    kill()
    fake_llm.release()
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, finished_at__isnull=False).first())
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed"), (run.error, run.outcome)
    assert run.attempts == 1
    assert [c.answered for c in fake_llm.calls_for(agent="agent-alex")] == [True]
    no_event_twice(task)


def test_a_run_cut_mid_statement_is_resumed_once_and_soon(cast, fake_llm, worker):
    """The statement recording the model's reply is cut: the run hands its lease back on a live
    connection and the Celery task retries at once (no sweep within the default lease); the lost
    reply is asked for again, the turn recorded once."""
    assert settings.RUNTIME_LEASE_SECONDS >= 30  # the default: no sweep within this test
    task, run = started_and_thinking(cast, fake_llm)
    with cut_when_blocked(Run.objects.filter(pk=run.pk), "%runtime_runturn%"):
        fake_llm.release()
    cut_at = time.monotonic()
    try:
        run = wait_for(
            lambda: Run.objects.filter(pk=run.pk, finished_at__isnull=False).first(), timeout=20
        )
    except AssertionError:
        run.refresh_from_db()
        pytest.fail(
            f"run still {run.status} 20 s after its database came back "
            f"(lease {run.lease_token!r} held, attempts {run.attempts})"
        )
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed"), (run.error, run.outcome)
    assert run.attempts == 2
    assert [c.answered for c in fake_llm.calls_for(agent="agent-alex")] == [True, True]
    assert time.monotonic() - cut_at < 20
    no_event_twice(task)
