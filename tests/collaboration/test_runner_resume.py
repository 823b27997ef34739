"""A session delivered again: a finished one is left, a broken one resumes, a live lease is respected."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from collaboration import runner
from collaboration.models import CollaborationSession
from tests.collaboration.conftest import event_names, run, specialists, wait_for
from tests.collaboration.starts import create
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def left_by_a_dead_worker(session, attempts: int = 1) -> None:
    """The session's row as a worker leaves it when it dies: running, started `attempts` times,
    its lease's heartbeat five minutes old."""
    CollaborationSession.objects.filter(pk=session.pk).update(
        status="running",
        attempts=attempts,
        lease_token="dead",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
        started_at=timezone.now(),
    )


def test_a_finished_session_is_not_run_again(acme, fake_llm):
    session = run(create(acme))
    calls = len(fake_llm.calls)
    assert runner.run_session(session.pk) == runner.FINISHED
    assert len(fake_llm.calls) == calls
    assert event_names(session).count("complete") == 1


def test_a_redelivered_session_resumes_without_rerunning_finished_agents(acme, fake_llm):
    session = create(acme, agents=specialists("a", "b", "c"), synthesis="merge")
    # The state a worker leaves when it dies: a done, b in flight, c not started.
    left_by_a_dead_worker(session)
    session.contributions.filter(agent_key="a").update(
        status="completed", response="A DONE", tokens_used=7
    )
    session.contributions.filter(agent_key="b").update(status="running", started_at=timezone.now())
    session = run(session)
    assert session.status == "completed"
    assert not fake_llm.calls_for(agent="a")
    assert len(fake_llm.calls_for(agent="b")) == 1 and len(fake_llm.calls_for(agent="c")) == 1
    assert "A DONE" in session.result
    resume = session.events.get(name="tool:collaborative:resume")
    assert resume.data == {"attempt": 2, "rerun": ["b"]}
    assert session.metadata["attempts"] == 2


def test_a_session_started_its_maximum_times_without_finishing_is_given_up(
    acme, fake_llm, settings
):
    """Its worker died on every start (a crash, the time limit): the next start fails it,
    saying so, without calling a model again; one start fewer still resumes it."""
    settings.COLLAB_MAX_ATTEMPTS = 2
    session = create(acme, agents=specialists("a", "b"), synthesis="merge")
    left_by_a_dead_worker(session, attempts=2)
    session.contributions.filter(agent_key="b").update(status="running", started_at=timezone.now())
    session = run(session)
    assert (session.status, session.attempts) == ("failed", 3)
    assert session.error.startswith("Given up after 2 starts that did not finish")
    assert not fake_llm.calls
    assert event_names(session).count("complete") == 1

    again = create(acme, agents=specialists("a"), synthesis="merge")
    left_by_a_dead_worker(again)
    assert run(again).status == "completed"


def test_a_synthesis_run_again_after_a_resume_counts_every_calls_tokens(acme, fake_llm):
    """The first run loses its lease while its synthesis is in flight; a resumed run synthesizes
    again and finishes; the first run's answer comes later. Both calls spent tokens: the total
    counts both."""

    fake_llm.on(purpose="agent", replies=Reply("an answer", prompt_tokens=5, completion_tokens=2))
    fake_llm.on(
        purpose="synthesis",
        replies=[
            Reply("SLOW", delay=1.5, prompt_tokens=10, completion_tokens=5),
            Reply("FAST", prompt_tokens=3, completion_tokens=1),
        ],
    )
    session = create(acme, agents=specialists("a"))

    def first_run():
        try:
            runner.run_session(session.pk)
        finally:
            connection.close()

    first = threading.Thread(target=first_run)
    first.start()
    wait_for(lambda: fake_llm.calls_for(purpose="synthesis"))
    # The first run's heartbeat stops counting (another token), as if its worker had stalled.
    CollaborationSession.objects.filter(pk=session.pk).update(
        lease_token="stalled", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    session = run(session)
    assert session.result == "FAST" and session.attempts == 2
    first.join(timeout=20)
    session.refresh_from_db()
    assert [c.answered for c in fake_llm.calls_for(purpose="synthesis")] == [True, True]
    assert session.metadata["agent_tokens"] == 7
    assert session.metadata["synthesis_tokens"] == 15 + 4
    assert session.metadata["total_tokens"] == 7 + 15 + 4


def test_a_session_with_a_live_lease_elsewhere_is_left_alone(acme, fake_llm):
    session = create(acme)
    CollaborationSession.objects.filter(pk=session.pk).update(
        status="running", attempts=1, lease_token="alive", heartbeat_at=timezone.now()
    )
    assert runner.run_session(session.pk) == runner.BUSY
    assert not fake_llm.calls


def test_a_missing_session_is_ignored(db):
    import uuid

    assert runner.run_session(uuid.uuid4()) == runner.MISSING


def test_a_resumed_sequential_session_briefs_later_agents_with_earlier_answers(acme, fake_llm):
    session = create(acme, mode="sequential", agents=specialists("a", "b"), synthesis="merge")
    left_by_a_dead_worker(session)
    session.contributions.filter(agent_key="a").update(status="completed", response="A-MARKER")
    assert run(session).status == "completed"
    assert not fake_llm.calls_for(agent="a")
    assert "A-MARKER" in fake_llm.calls_for(agent="b")[0].prompt
