"""Managed agents and human decisions (issue 37 §2): a run that asks a human or meets the gate
leaves its task as it is; the answer or the verdict wakes the agent with a `decision` run."""

import signal

import pytest
from django.conf import settings

from runtime.models import Run
from tasks import services
from tasks.models import HumanDecision, PolicyTrigger, Task, TaskStatus
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.runtime.conftest import drain, runs_of, wait_for
from tests.runtime.scripts import call, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_that_asks_a_human_leaves_its_task_and_the_answer_wakes_it(cast, fake_llm):
    managed_by(cast.alex)
    task = cast.assign(cast.alex, "Pick the region")
    script(
        fake_llm,
        cast.alex,
        call("ask_human", task=task.pk, question="Which region?", options=["eu", "us"]),
        "The human said eu: deploying to eu.",
    )
    drain()
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, cast.alex)
    # The run ended at the question: one model call, the task left to wait for the answer.
    asked = Run.objects.get(agent=cast.alex, trigger="created")
    assert asked.status == "completed"
    assert asked.outcome == [{"task": task.pk, "action": "none", "why": "waits for a human"}]
    assert [d["kind"] for d in asked.turn_rows.values_list("data", flat=True)] == [
        "model",
        "tool_call",
    ]
    decision = HumanDecision.objects.get(task=task)
    assert decision.status == "pending"

    human = KeyClient(make_key(cast.org))
    response = human.post(f"/api/decisions/{decision.pk}/answer", {"answer": "eu"}, format="json")
    assert response.status_code == 200, response.content
    drain()
    assert runs_of(cast.alex)[-1] == ("completed", "decision", task.pk)
    run = Run.objects.filter(agent=cast.alex, trigger="decision").get()
    (shown,) = [t for t in run.context["tasks"] if t["id"] == task.pk]
    assert [(d["id"], d["answer"]) for d in shown["decisions"]] == [(decision.pk, "eu")]
    assert "a human decided" in run.input
    woken = human.get("/api/runs", {"trigger": "decision"}).json()["results"]
    assert [(r["agent"], r["trigger"]) for r in woken] == [("agent-alex", "decision")]
    task.refresh_from_db()
    assert task.status == TaskStatus.COMPLETED
    assert "eu" in task.result


def test_no_timer_wakes_an_agent_that_waits_for_a_human(cast, fake_llm):
    managed_by(cast.alex)
    task = cast.assign(cast.alex, "Pick the region")
    script(
        fake_llm,
        cast.alex,
        call("ask_human", task=task.pk, question="Which region?"),
    )
    drain()
    services.decisions_sweep()
    assert drain() == []
    assert [r[1] for r in runs_of(cast.alex)] == ["created"]


def gated_delegation(cast, fake_llm, model: str = "m-1") -> tuple[KeyClient, int]:
    """A cross-team delegation policy; a human's task whose model has Alex delegate it to
    Morgan (the move waits), then answer twice. The human's client and the task's id."""
    services.policy_create(
        org=cast.org, name="Cross-team waits", trigger=PolicyTrigger.CROSS_TEAM_DELEGATION
    )
    managed_by(cast.alex, "openai", model)
    human = KeyClient(make_key(cast.org))
    task_id = human.post("/api/tasks", {"title": "Tune Redis"}, format="json").json()["id"]
    script(
        fake_llm,
        cast.alex,
        call("delegate_task", task_id=task_id, agent_id="agent-morgan"),
        "Asked to delegate it to Morgan; it waits for approval.",
        "Morgan has it now.",
    )
    return human, task_id


@pytest.mark.worker
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
def test_a_gated_delegation_on_a_real_worker_waits_then_goes_on_when_approved(
    cast, fake_llm, worker
):
    """Alex (Development) delegates to Morgan (Ops) from its run: the move waits; the admin
    approves; the delegation happens as Alex's, and Alex's `decision` run goes on."""
    human, task_id = gated_delegation(cast, fake_llm)

    def pending():
        return HumanDecision.objects.filter(task_id=task_id, status="pending").first()

    assigned = human.post(f"/api/tasks/{task_id}/assign", {"agent_id": "agent-alex"}, format="json")
    assert assigned.status_code == 200, assigned.content
    decision = wait_for(pending, timeout=30, interval=0.1)
    first = wait_for(
        lambda: Run.objects.filter(agent=cast.alex, status="completed").first(),
        timeout=30,
        interval=0.1,
    )
    assert first.trigger == "assigned"
    assert Task.objects.get(pk=task_id).assignee == cast.alex

    approved = human.post(f"/api/decisions/{decision.pk}/approve", {}, format="json").json()
    assert approved["outcome"]["result"] == "executed"
    assert Task.objects.get(pk=task_id).assignee == cast.morgan

    def decision_run():
        runs = human.get("/api/runs", {"trigger": "decision"}).json()["results"]
        return runs if runs and runs[0]["status"] in ("completed", "failed") else None

    runs = wait_for(decision_run, timeout=30, interval=0.1)
    assert [(r["agent"], r["status"]) for r in runs] == [("agent-alex", "completed")]


@pytest.mark.worker
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
@pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"],
    reason="worker processes share the test database: needs PostgreSQL",
)
def test_a_decision_outlives_the_worker_that_raised_it(cast, fake_llm, tmp_path):
    """The worker whose run raised the decision is killed; the web side's connections are
    dropped; approved afterwards, the move runs and a new worker process runs the wake-up."""
    from django.db import connections

    from tests.runtime.conftest import flush_redis
    from tests.runtime.test_worker import logs_of, start_worker_process

    human, task_id = gated_delegation(cast, fake_llm, model="fake")
    flush_redis()
    first = start_worker_process("first", fake_llm, tmp_path)
    second = None
    try:
        human.post(f"/api/tasks/{task_id}/assign", {"agent_id": "agent-alex"}, format="json")
        decision = wait_for(
            lambda: HumanDecision.objects.filter(task_id=task_id, status="pending").first(),
            timeout=60,
            interval=0.1,
        )
        wait_for(
            lambda: Run.objects.filter(agent=cast.alex, status="completed").exists(),
            timeout=60,
            interval=0.1,
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        connections.close_all()
        second = start_worker_process("second", fake_llm, tmp_path)

        approved = human.post(f"/api/decisions/{decision.pk}/approve", {}, format="json")
        assert approved.status_code == 200, approved.content
        assert approved.json()["outcome"]["result"] == "executed"
        woken = wait_for(
            lambda: Run.objects.filter(
                agent=cast.alex, trigger="decision", status="completed"
            ).first(),
            timeout=60,
            interval=0.1,
        )
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
    assert woken is not None, logs_of(tmp_path)
    assert Task.objects.get(pk=task_id).assignee == cast.morgan
    assert HumanDecision.objects.get(pk=decision.pk).status == "approved"
