"""A session whose database connections are dropped (a server restart, a failover, an idle
timeout: `pg_terminate_backend`) while an agent's call is in flight or in the middle of the
session's own statement, and a run whose lease another run took over. The database is back at
once; the session must neither stay `running` with nothing to resume it, nor be run twice at
once, nor lose a cancel.

Also: a cancel accepted while the session synthesizes ends it cancelled, as its caller was told.
"""

import threading

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.conf import settings
from django.db import OperationalError, connection
from django.utils import timezone

from collaboration import runner
from collaboration.models import CollaborationSession
from collaboration.services import session_cancel
from config.celery import app
from tests.collaboration.conftest import event_names, human, specialists, wait_for
from tests.collaboration.starts import started
from tests.conftest import requires_postgres
from tests.db_cut import OTHER_BACKENDS, cut_when_blocked, kill
from tests.fake_llm import Reply

pytestmark = [
    requires_postgres(),
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_pool"),
]

HEARTBEAT_BACKENDS = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (query ILIKE 'UPDATE%%lease_token%%' OR query ILIKE '%%cancel_requested%%LIMIT 1%%')
"""


def in_thread(session_id, outcome: dict | None = None) -> threading.Thread:
    outcome = {} if outcome is None else outcome

    def work():
        try:
            outcome["returned"] = runner.run_session(session_id)
        except Exception as exc:  # what the Celery task sees
            outcome["raised"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def fetch(session) -> CollaborationSession:
    return CollaborationSession.objects.get(pk=session.pk)


@pytest.fixture
def hanging(acme, fake_llm):
    """A session whose one agent hangs in the fake LLM until released."""
    fake_llm.on(agent="slow", replies=Reply("late answer\nCONFIDENCE: 0.5", hang=True))
    caller = human(acme)
    return caller, started(acme, specialists("slow"), caller, synthesis="merge", agent_timeout=60)


def test_the_heartbeat_goes_on_after_its_connection_is_dropped(hanging, fake_llm):
    caller, session = hanging
    thread = in_thread(session.pk)
    try:
        wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
        wait_for(lambda: kill(HEARTBEAT_BACKENDS), timeout=10)
        killed_at = timezone.now()
        # Beats every second: without a new connection the lease would lapse while the run lives.
        wait_for(lambda: fetch(session).heartbeat_at > killed_at, timeout=8)
        # And a cancel is still noticed (the heartbeat is what reads it during a run).
        session_cancel(caller=caller, session=session)
        wait_for(lambda: fetch(session).status == "cancelled", timeout=8)
    finally:
        fake_llm.release()
        thread.join(timeout=30)
    assert len(fake_llm.calls_for(agent="slow")) == 1


def test_a_run_whose_lease_was_taken_over_stops_and_leaves_the_outcome_to_the_new_one(
    hanging, fake_llm
):
    """Its beats stopped long enough for another run to claim the session: the old run must not
    synthesize nor finish it (both would run it at once, and each write an outcome)."""
    _, session = hanging
    thread = in_thread(session.pk)
    wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
    CollaborationSession.objects.filter(pk=session.pk).update(lease_token="another-run")
    fake_llm.release()
    thread.join(timeout=30)
    assert not thread.is_alive()
    session = fetch(session)
    assert session.status == "running" and session.lease_token == "another-run"
    assert "complete" not in event_names(session)


def test_a_restart_while_the_agent_thinks_costs_the_session_nothing(hanging, fake_llm):
    """Every connection is dropped during the agent's call: the session's threads held none
    (the heartbeat gives its back after each beat), so the same run ends the session."""
    _, session = hanging
    outcome: dict = {}
    thread = in_thread(session.pk, outcome)
    wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
    kill(OTHER_BACKENDS)
    fake_llm.release()
    thread.join(timeout=30)
    assert outcome == {"returned": "claimed"}, outcome
    session = fetch(session)
    assert session.status == "completed", (session.status, session.error)
    assert len(fake_llm.calls_for(agent="slow")) == 1


# The session's first write once its agents are done: it moves to synthesizing.
FINISHING = '%"collaboration_collaborationsession" SET "status"%'


def test_a_run_that_lost_its_database_hands_the_session_back_to_resume(hanging, fake_llm):
    """The session's own statement is cut as it moves on to the synthesis: the run raises the database's error
    (the Celery task retries on it), gives its lease back, and the next run ends the session
    without asking the agent again."""
    _, session = hanging
    outcome: dict = {}
    thread = in_thread(session.pk, outcome)
    wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
    with cut_when_blocked(CollaborationSession.objects.filter(pk=session.pk), FINISHING):
        fake_llm.release()
    thread.join(timeout=30)
    assert isinstance(outcome.get("raised"), OperationalError), outcome
    assert (fetch(session).status, fetch(session).lease_token) == ("running", "")
    assert runner.run_session(session.pk) == "claimed"  # at once: the lease was handed back
    session = fetch(session)
    assert session.status == "completed", (session.status, session.error)
    assert session.contributions.get().status == "completed"
    assert len(fake_llm.calls_for(agent="slow")) == 1


@pytest.mark.worker
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
def test_on_a_celery_worker_the_session_is_retried_and_ends(acme, fake_llm):
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    fake_llm.on(agent="slow", replies=Reply("late answer\nCONFIDENCE: 0.5", hang=True))
    states = []

    def on_postrun(task=None, state=None, **kwargs):
        if task is not None and task.name == "collaboration.run_session":
            states.append(state)

    task_postrun.connect(on_postrun, weak=False)
    try:
        with start_worker(
            app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
        ):
            session = started(acme, specialists("slow"), synthesis="merge", agent_timeout=60)
            wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
            with cut_when_blocked(CollaborationSession.objects.filter(pk=session.pk), FINISHING):
                fake_llm.release()
            wait_for(lambda: fetch(session).is_finished, timeout=30)
            wait_for(lambda: "SUCCESS" in states, timeout=10)
    finally:
        task_postrun.disconnect(on_postrun)
    # Acked as failed, nothing would have resumed it: the task is retried instead.
    assert states[0] == "RETRY" and states[-1] == "SUCCESS", states
    assert fetch(session).status == "completed"


def test_a_cancel_accepted_during_the_synthesis_ends_the_session_cancelled(acme, fake_llm):
    fake_llm.on(purpose="synthesis", replies=Reply("THE SYNTHESIS", hang=True))
    caller = human(acme)
    session = started(
        acme, specialists("a", "b"), caller, synthesis="coordinator", agent_timeout=30
    )
    thread = in_thread(session.pk)
    try:
        wait_for(lambda: fake_llm.calls_for(purpose="synthesis"), timeout=30)
        cancelled = session_cancel(caller=caller, session=session)
        assert cancelled.status == "synthesizing" and cancelled.cancel_requested
    finally:
        fake_llm.release()
        thread.join(timeout=30)
    session = fetch(session)
    assert session.status == "cancelled", (session.status, event_names(session))
    assert event_names(session)[-2:] == ["cancel_requested", "cancelled"]
