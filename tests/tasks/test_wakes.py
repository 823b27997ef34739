"""`tasks.signals.work_reached_agent(agent, trigger, task)`: the hook a managed agent runtime
will wake its agents with (issue 11 §1). Sent once the move commits, for each inbox item that
asks its agent to act — never for the agent's own act, never for a move that failed."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.models import Task
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.signals import WAKING_KINDS, work_reached_agent
from tasks.sweep import sweep_stale_queued
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


@pytest.fixture
def woken():
    """The (agent handle, trigger, task id) of every signal sent, in order."""
    seen = []

    def receiver(sender, agent, trigger, task, **kwargs):
        assert sender is Task
        seen.append((agent.handle, trigger, task.pk))

    work_reached_agent.connect(receiver, sender=Task, weak=False)
    yield seen
    work_reached_agent.disconnect(receiver, sender=Task)


@pytest.fixture
def commits(django_capture_on_commit_callbacks):
    """Each use runs the block and then its on-commit callbacks, as a real commit would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def test_the_waking_kinds_are_the_documented_ones():
    assert WAKING_KINDS == {
        "created",
        "assigned",
        "auto_assigned",
        "delegated",
        "escalated",
        "comment",
        "subtasks_done",
        "decision",
    }


def test_assigned_delegated_and_escalated_work_wakes_its_agent(cast, woken, commits):
    sarah = cast.client(cast.sarah)
    with commits():
        task = create(cast.human, agent_id="agent-sarah").json()
    assert woken == [("agent-sarah", "created", task["id"])]
    with commits():
        post(sarah, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    with commits():
        post(cast.client(cast.alex), f"/api/tasks/{task['id']}/escalate", {"reason": "stuck"})
    other = create(cast.human).json()
    with commits():
        post(cast.human, f"/api/tasks/{other['id']}/assign", {"agent_id": "agent-morgan"})
    assert woken[1:] == [
        ("agent-alex", "delegated", task["id"]),
        ("agent-boss", "escalated", task["id"]),
        ("agent-morgan", "assigned", other["id"]),
    ]


def test_nothing_is_sent_before_the_commit(cast, woken, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        create(cast.human, agent_id="agent-sarah")
    assert woken == [] and len(callbacks) == 1


def test_an_agents_own_act_a_queue_and_a_failed_move_wake_nobody(cast, woken, commits):
    sarah = cast.client(cast.sarah)
    give_tasks(cast.alex, 5)
    with commits():
        mine = create(sarah, agent_id="agent-sarah").json()  # claimed for herself
        waiting = create(sarah).json()
        post(sarah, f"/api/tasks/{waiting['id']}/queue", {"agent_id": "agent-alex"})
        assert_error(create(sarah, agent_id="agent-alex"), 409, "capacity_exceeded")
    assert woken == []
    assert cast.alex.inbox_items.filter(kind="queued", task_id=waiting["id"]).exists()
    assert Task.objects.get(pk=mine["id"]).assignee == cast.sarah


def test_the_refill_wakes_the_expert(cast, woken, commits):
    held = give_tasks(cast.alex, 5, status="in_progress")
    waiting = task_create(org=cast.org, actor=SYSTEM, title="in line")
    Task.objects.filter(pk=waiting.pk).update(queued_for=cast.alex)
    with commits():
        post(cast.client(cast.alex), f"/api/tasks/{held[0].pk}/status", {"status": "completed"})
    assert woken == [("agent-alex", "auto_assigned", waiting.pk)]


def test_a_comment_wakes_the_others_and_a_finish_informs_without_waking(cast, woken, commits):
    sarah, alex = cast.client(cast.sarah), cast.client(cast.alex)
    task = create(sarah, agent_id="agent-alex").json()
    with commits():
        post(alex, f"/api/tasks/{task['id']}/comments", {"body": "Starting."})
    assert woken == [("agent-sarah", "comment", task["id"])]
    woken.clear()
    with commits():
        post(alex, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
        post(alex, f"/api/tasks/{task['id']}/status", {"status": "completed", "result": "ok"})
    # Sarah has an inbox item (status_changed) but nothing to do.
    assert cast.sarah.inbox_items.filter(kind="status_changed").count() == 1
    assert woken == []


def test_subtasks_done_wakes_the_parents_holder(cast, woken, commits):
    parent = create(cast.human, agent_id="agent-sarah").json()
    child = create(cast.client(cast.sarah), parent=parent["id"], agent_id="agent-alex").json()
    alex = cast.client(cast.alex)
    post(alex, f"/api/tasks/{child['id']}/status", {"status": "in_progress"})
    with commits():
        post(alex, f"/api/tasks/{child['id']}/status", {"status": "completed"})
    assert woken == [("agent-sarah", "subtasks_done", parent["id"])]


def test_the_stale_sweep_wakes_whom_it_escalates_to(cast, woken, commits):
    task = task_create(org=cast.org, actor=SYSTEM, title="forgotten")
    Task.objects.filter(pk=task.pk).update(
        queued_by=cast.sarah, queued_at=timezone.now() - timedelta(days=2)
    )
    with commits():
        assert sweep_stale_queued().escalated == 1
    assert woken == [("agent-boss", "escalated", task.pk)]


def test_the_task_the_sweep_sends_reads_its_fields_as_written(cast, commits):
    # The sweep sends each task as a deferred instance (its id): a receiver that reads more
    # gets the row as the sweep wrote it.
    task = task_create(org=cast.org, actor=SYSTEM, title="forgotten")
    Task.objects.filter(pk=task.pk).update(
        queued_by=cast.sarah, queued_at=timezone.now() - timedelta(days=2)
    )
    read = []

    def receiver(sender, agent, trigger, task, **kwargs):
        read.append((task.pk, task.title, task.status, task.queued_for_id, task.assignee_id))

    work_reached_agent.connect(receiver, sender=Task, weak=False)
    try:
        with commits():
            assert sweep_stale_queued().escalated == 1
    finally:
        work_reached_agent.disconnect(receiver, sender=Task)
    task.refresh_from_db()
    assert read == [(task.pk, "forgotten", task.status, task.queued_for_id, task.assignee_id)]
    assert (task.queued_for_id or task.assignee_id) == cast.boss.pk


def test_a_failing_receiver_neither_fails_nor_undoes_the_move(cast, commits, caplog):
    def broken(**kwargs):
        raise RuntimeError("the runtime is down")

    work_reached_agent.connect(broken, sender=Task, weak=False)
    try:
        with caplog.at_level(logging.ERROR), commits():
            response = create(cast.human, agent_id="agent-sarah")
    finally:
        work_reached_agent.disconnect(broken, sender=Task)
    assert response.status_code == 201
    assert Task.objects.filter(pk=response.json()["id"], assignee=cast.sarah).exists()
    assert "the runtime is down" in caplog.text
