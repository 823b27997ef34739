"""Managed agents on real Celery workers (issue 11 §2): a run queued by a REST call runs on a
worker; a run whose worker is SIGKILLed is finished by another worker without repeating the tool
call that had taken effect, and no task event is written twice.

The in-process worker (`start_worker`) runs on the Redis broker of REDIS_URL; the SIGKILL test
starts `celery -A config worker` processes on the test database, with a short lease so that the
sweep hands the dead worker's run to the second worker quickly.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from costs.models import UsageRecord
from runtime.models import Run
from runtime.services import sweep_runs
from tasks.models import Task, TaskEvent
from tests.collaboration.test_durability import database_url
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.fake_llm import Reply, ToolUse
from tests.runtime.conftest import flush_redis, wait_for
from tests.runtime.scripts import calling, managed_by, script

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.worker,
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]

BASE_DIR = Path(__file__).resolve().parents[2]
LEASE = 2


def test_a_task_created_over_rest_is_worked_by_managed_agents_on_the_worker(cast, offline, worker):
    client = KeyClient(make_key(cast.org))
    response = client.post(
        "/api/tasks",
        {"title": "Build the page", "required_expertise": "React", "agent_id": "agent-lena"},
        format="json",
    )
    assert response.status_code == 201
    task_id = response.json()["id"]

    def done():
        body = client.get(f"/api/tasks/{task_id}").json()
        return body if body["status"] == "completed" else None

    body = wait_for(done, timeout=30, interval=0.1)
    assert body["assignee"] == "agent-sarah"
    assert body["result"].startswith("[offline provider")

    # A run completes the task, then ends in a statement of its own: wait for that too.
    def runs_ended():
        runs = client.get("/api/runs", {"task": task_id}).json()["results"]
        return runs if all(r["status"] in ("completed", "failed") for r in runs) else None

    runs = wait_for(runs_ended, timeout=30, interval=0.1)
    assert [(r["agent"], r["trigger"], r["status"]) for r in reversed(runs)] == [
        ("agent-lena", "created", "completed"),
        ("agent-sarah", "delegated", "completed"),
    ]


def start_worker_process(name: str, fake, tmp_path) -> subprocess.Popen:
    env = {
        **os.environ,
        **fake.env(),
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "RUNTIME_LEASE_SECONDS": str(LEASE),
    }
    env.pop("TEST_DATABASE_NAME", None)
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-n", f"{name}@%h"]
        # No pool or concurrency option: the settings' (the threads pool), as in production.
        + "-l INFO --without-gossip --without-mingle --without-heartbeat".split(),
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def logs_of(tmp_path) -> str:
    return "\n".join(p.read_text() for p in tmp_path.glob("*.log"))[-3000:]


@pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="worker processes share the test database: needs PostgreSQL",
)
def test_a_run_whose_worker_is_sigkilled_is_finished_by_another(cast, fake_llm, tmp_path, settings):
    settings.RUNTIME_LEASE_SECONDS = LEASE  # the sweep here, as the workers' lease
    managed_by(cast.alex, "openai", "fake")
    script(
        fake_llm,
        cast.alex,
        calling(
            ToolUse(
                "create_task",
                {"title": "Rotate the keys", "agent_id": "agent-morgan"},
                id="w1",
            )
        ),
        Reply(hang=True),
        "Indexed; Morgan rotates the keys.",
    )
    flush_redis()
    first = start_worker_process("first", fake_llm, tmp_path)
    second = None
    try:
        task = cast.assign(cast.alex, "Index it")
        run = Run.objects.get(agent=cast.alex)

        def second_call_in_flight():
            recorded = Run.objects.get(pk=run.pk).turns
            return len(fake_llm.calls_for(agent="agent-alex")) == 2 and any(
                t.get("status") == "ok" for t in recorded
            )

        wait_for(second_call_in_flight, timeout=60, interval=0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second = start_worker_process("second", fake_llm, tmp_path)
        # Once the dead worker's lease is stale, the sweep (the beat's job) sends the run again.
        wait_for(lambda: sweep_runs()["resent"] == [run.pk], timeout=30, interval=0.2)

        def finished():
            r = Run.objects.get(pk=run.pk)
            return r if r.is_finished else None

        run = wait_for(finished, timeout=60, interval=0.1)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
    assert run.status == "completed", logs_of(tmp_path)
    assert run.attempts == 2
    # The call that had taken effect was not repeated: one new task for Morgan, one event each.
    (made,) = Task.objects.filter(title="Rotate the keys")
    assert made.assignee == cast.morgan
    assert TaskEvent.objects.filter(task=made).count() == 1
    calls = [t for t in run.turns if t["kind"] == "tool_call"]
    assert [(c["name"], c["status"]) for c in calls] == [("create_task", "ok")]
    # The model call the killed worker left hanging is the only one made again.
    assert [c.answered for c in fake_llm.calls_for(agent="agent-alex")] == [True, False, True]
    # One ledger row an answered call, none twice (the killed call, held by no budget, left none).
    states = list(UsageRecord.objects.filter(run=run).values_list("state", flat=True))
    assert states == ["recorded", "recorded"], states
    task.refresh_from_db()
    assert (task.status, task.result) == ("completed", "Indexed; Morgan rotates the keys.")
    rows = list(TaskEvent.objects.values_list("task_id", "kind", "actor_label", "before", "after"))
    assert len(rows) == len({repr(r) for r in rows}), rows  # no event written twice
