"""A worker process is SIGKILLed mid-session; a second worker resumes the session.

Two moments: while an agent's call is in flight (that agent alone is asked again), and while the
synthesis is in flight after every agent has answered (no agent is asked again: each is called
exactly once, and only the synthesis runs a second time).

The workers are real `celery -A config worker` processes on the Redis broker of REDIS_URL and
the test database. Their Redis visibility_timeout is lowered (10 s) so that the killed worker's
unacked message is re-delivered quickly; the session limits are lowered with it (the start-up
check wants visibility_timeout > COLLAB_SESSION_TIME_LIMIT and RUNTIME_RUN_TIME_LIMIT). The second worker starts once that
message is past its visibility timeout: kombu 5.6 restores such messages when a worker starts,
and a running worker only looks every 100 s (its interval is not configurable before 5.7).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from collaboration.models import CollaborationSession
from tests.collaboration.conftest import specialists, wait_for
from tests.collaboration.starts import started
from tests.fake_llm import Reply

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="worker processes share the test database: needs PostgreSQL",
    ),
]

BASE_DIR = Path(__file__).resolve().parents[2]
VISIBILITY_TIMEOUT = 10


def database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def start_worker_process(name: str, fake, tmp_path) -> subprocess.Popen:
    env = {
        **os.environ,
        **fake.env(),
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "fake-model",
        "COLLAB_AGENT_TIMEOUT": "5",
        "COLLAB_SESSION_TIME_LIMIT": "9",
        "RUNTIME_RUN_TIME_LIMIT": "9",
        "A2A_REMOTE_MAX_WAIT_SECONDS": "5",
        "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "CELERY_UNACKED_RESTORE_INTERVAL": "1",
        "CELERY_UNACKED_RESTORE_THROTTLE": "1",
        "COLLAB_LEASE_SECONDS": "3",
    }
    env.pop("TEST_DATABASE_NAME", None)
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-P",
            "solo",
            "-n",
            f"{name}@%h",
            "-l",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def unacked_are_visible_again(client) -> bool:
    """The killed worker's unacked messages (kombu's `unacked_index`, scored by delivery time)
    are older than the visibility timeout: a worker starting now re-delivers them."""
    newest = client.zrevrange("unacked_index", 0, 0, withscores=True)
    return not newest or newest[0][1] < time.time() - VISIBILITY_TIMEOUT - 0.5


@pytest.fixture
def kill_and_resume(acme, fake_llm, tmp_path):
    """Start a session of acme's (task "t" for `agents`, the rest of the payload as given) on a
    first worker, SIGKILL it once `killable(session)` holds, let a second worker finish the
    session; returns the finished session."""
    import redis

    def kill_and_resume(agents: list[dict], killable, **payload) -> CollaborationSession:
        redis.Redis.from_url(settings.REDIS_URL).flushdb()
        first = start_worker_process("first", fake_llm, tmp_path)
        second = None
        try:
            session = started(acme, agents, **payload)
            wait_for(lambda: killable(session), timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            wait_for(
                lambda: unacked_are_visible_again(redis.Redis.from_url(settings.REDIS_URL)),
                timeout=VISIBILITY_TIMEOUT + 10,
                interval=0.2,
            )
            second = start_worker_process("second", fake_llm, tmp_path)

            def done():
                s = CollaborationSession.objects.get(pk=session.pk)
                return s if s.is_finished else None

            return wait_for(done, timeout=60, interval=0.2)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(timeout=15)

    return kill_and_resume


def logs_of(tmp_path) -> str:
    return "\n".join(p.read_text() for p in tmp_path.glob("*.log"))[-3000:]


def test_a_session_survives_a_sigkilled_worker(fake_llm, tmp_path, kill_and_resume):
    # b's first request hangs: the first worker is killed while it waits for it.
    fake_llm.on(agent="b", replies=[Reply(hang=True), Reply("b, second try\nCONFIDENCE: 0.7")])
    fake_llm.on(purpose="agent", replies=Reply("an answer\nCONFIDENCE: 0.6", delay=0.2))
    session = kill_and_resume(
        specialists("a", "b", "c"),
        lambda s: fake_llm.calls_for(agent="b"),
        mode="sequential",
        synthesis="merge",
    )
    assert session.status == "completed", logs_of(tmp_path)
    assert session.attempts == 2
    # Each agent answered exactly once; a finished agent (a) was never asked again, and b's
    # request that the killed worker left hanging is the only one repeated.
    for name in ("a", "b", "c"):
        assert len(fake_llm.calls_for(agent=name, answered=True)) == 1, name
    assert len(fake_llm.calls_for(agent="a")) == 1
    assert len(fake_llm.calls_for(agent="c")) == 1
    assert [c.answered for c in fake_llm.calls_for(agent="b")] == [False, True]
    resume = session.events.get(name="tool:collaborative:resume")
    assert resume.data == {"attempt": 2, "rerun": ["b"]}
    assert [c.status for c in session.contributions.order_by("position")] == ["completed"] * 3


def test_a_worker_killed_during_synthesis_calls_each_agent_once(
    fake_llm, tmp_path, kill_and_resume
):
    """The issue's sentence to the letter: the session completes on a second worker with each
    agent called once — the kill comes after every contribution is saved, while the first
    worker waits for the coordinator's synthesis."""
    fake_llm.on(purpose="synthesis", replies=[Reply(hang=True), Reply("THE SYNTHESIS, run 2")])
    fake_llm.on(purpose="agent", replies=Reply("an answer\nCONFIDENCE: 0.6", delay=0.2))

    def synthesis_in_flight(session):
        statuses = set(session.contributions.values_list("status", flat=True))
        return (
            statuses == {"completed"}
            and session.events.filter(name="tool:collaborative:synthesis:start").exists()
            and fake_llm.calls_for(purpose="synthesis")
        )

    session = kill_and_resume(
        specialists("a", "b", "c"), synthesis_in_flight, mode="parallel", synthesis="coordinator"
    )
    assert session.status == "completed", logs_of(tmp_path)
    assert session.attempts == 2
    for name in ("a", "b", "c"):
        calls = fake_llm.calls_for(agent=name)
        assert [c.answered for c in calls] == [True], name
    # The synthesis alone ran again: its first request died with the worker.
    assert [c.answered for c in fake_llm.calls_for(purpose="synthesis")] == [False, True]
    assert session.result == "THE SYNTHESIS, run 2"
    resume = session.events.get(name="tool:collaborative:resume")
    assert resume.data == {"attempt": 2, "rerun": []}
    names = [e.name.removeprefix("tool:collaborative:") for e in session.events.order_by("id")]
    assert names.count("agent:start") == 3 and names.count("agent:complete") == 3
    assert names.count("synthesis:start") == 2 and names.count("complete") == 1
    assert names[-2:] == ["synthesis:start", "complete"]
    assert [c.status for c in session.contributions.order_by("position")] == ["completed"] * 3
    assert session.metadata["agents_completed"] == 3


def test_the_tokens_of_a_synthesis_run_again_are_counted(fake_llm, tmp_path, kill_and_resume):
    """The second worker's synthesis spends tokens too: they are in the session's total."""
    fake_llm.on(
        purpose="synthesis",
        replies=[
            Reply(hang=True),
            Reply("THE SYNTHESIS, run 2", prompt_tokens=11, completion_tokens=4),
        ],
    )
    fake_llm.on(
        purpose="agent",
        replies=Reply(
            "an answer\nCONFIDENCE: 0.6", delay=0.2, prompt_tokens=5, completion_tokens=2
        ),
    )

    def synthesis_in_flight(session):
        return session.events.filter(
            name="tool:collaborative:synthesis:start"
        ).exists() and fake_llm.calls_for(purpose="synthesis")

    session = kill_and_resume(
        specialists("a", "b"), synthesis_in_flight, mode="parallel", synthesis="coordinator"
    )
    assert session.status == "completed", logs_of(tmp_path)
    assert session.attempts == 2
    assert session.metadata["agent_tokens"] == 14
    assert session.metadata["synthesis_tokens"] == 15
    assert session.metadata["total_tokens"] == 29
    complete = session.events.get(name="tool:collaborative:complete")
    assert complete.data["total_tokens"] == 29
