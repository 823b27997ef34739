"""One escalation: the move and the stale sweep choose the same target and leave the same state."""

from datetime import timedelta

import pytest
from django.utils import timezone

from organization.models import TeamRule
from tasks import events, sql
from tasks.models import Task, TaskEvent
from tasks.rules import SYSTEM, Actor
from tasks.services import task_create, task_escalate
from tasks.sweep import sweep_stale_queued
from tests.conftest import KeyClient
from tests.factories import give_tasks, make_agent, make_key, make_org
from tests.tasks.conftest import assert_error, post

pytestmark = pytest.mark.django_db


def queued_task(org, *, by, for_, title):
    task = task_create(org=org, actor=SYSTEM, title=title)
    Task.objects.filter(pk=task.pk).update(
        queued_by=by, queued_for=for_, queued_at=timezone.now() - timedelta(hours=5)
    )
    return Task.objects.get(pk=task.pk)


def state(task):
    task.refresh_from_db()
    return (task.status, task.assignee_id, task.queued_for_id, task.delegation_chain)


@pytest.mark.parametrize("boss_is_full", [False, True])
def test_the_move_and_the_sweep_escalate_a_queued_task_alike(boss_is_full):
    org = make_org("alike")
    chief = make_agent(org, "agent-chief")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    if boss_is_full:
        give_tasks(boss, 5)
    else:
        boss.workload_capacity = 10
        boss.save()
    TeamRule.objects.create(organization=org, default_supervisor=chief)
    moved = queued_task(org, by=worker, for_=expert, title="moved")
    swept = queued_task(org, by=worker, for_=expert, title="swept")

    task_escalate(task=moved, actor=SYSTEM)
    assert sweep_stale_queued().escalated == 1

    assert state(moved) == state(swept)
    if boss_is_full:
        assert (swept.status, swept.queued_for) == ("queued", boss)
    else:
        assert (swept.status, swept.assignee) == ("assigned", boss)
    by_move, by_sweep = (TaskEvent.objects.get(task=t, kind="escalated") for t in (moved, swept))
    assert (by_move.recipient, by_move.after) == (by_sweep.recipient, by_sweep.after)
    assert by_move.primary_choice == by_sweep.primary_choice == "agent-boss"


def test_without_anyone_above_both_escalate_to_humans():
    org = make_org("nobody-above")
    worker = make_agent(org, "agent-worker")
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    moved = queued_task(org, by=worker, for_=expert, title="moved")
    swept = queued_task(org, by=worker, for_=expert, title="swept")
    task_escalate(task=moved, actor=SYSTEM)
    sweep_stale_queued()
    assert state(moved) == state(swept) == ("escalated", None, None, [])
    assert (
        TaskEvent.objects.get(task=swept, kind="escalated").message
        == "The system escalated the stale task to humans."
    )


def test_a_batch_refuses_an_event_whose_fields_it_would_drop():
    org = make_org("batched")
    alex = make_agent(org, "agent-alex")
    task = task_create(org=org, actor=SYSTEM, title="t")
    event = events.escalation_event(
        task=task,
        actor=Actor("agent", alex.handle, agent=alex),
        before={},
        target=None,
        verdict=None,
        notes="would be lost",
    )
    with pytest.raises(ValueError, match="Batched events"):
        sql.insert_events([event], timezone.now())


@pytest.mark.parametrize("escalated_by", ["expert", "sweep"])
def test_who_queued_a_task_moves_it_no_more_once_it_waits_for_humans(escalated_by):
    # Who queued a task may move it while it waits in that queue (take it back, pass it on).
    # Escalated to humans, it left the queue: the queuer is one more agent that passed it on,
    # as an agent that escalated a task it held is, and moves it no more.
    org = make_org("left-the-queue")
    worker = make_agent(org, "agent-worker")  # nobody above: escalations go to humans
    expert = make_agent(org, "agent-expert")
    make_agent(org, "agent-other")
    give_tasks(expert, 5)
    human, queuer = KeyClient(make_key(org)), KeyClient(make_key(org, worker))
    task = post(human, "/api/tasks", {"title": "t", "agent_id": "agent-worker"}).json()
    moved = post(queuer, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-expert"})
    assert moved.status_code == 200, moved.content
    if escalated_by == "expert":
        moved = post(KeyClient(make_key(org, expert)), f"/api/tasks/{task['id']}/escalate", {})
        assert moved.status_code == 200, moved.content
    else:
        Task.objects.filter(pk=task["id"]).update(queued_at=timezone.now() - timedelta(days=2))
        assert sweep_stale_queued().escalated == 1
    assert Task.objects.get(pk=task["id"]).status == "escalated"

    assert queuer.get(f"/api/tasks/{task['id']}").status_code == 200  # it still sees it
    for move, body in [
        ("assign", {"agent_id": "agent-other"}),
        ("delegate", {"agent_id": "agent-other"}),
        ("queue", {"agent_id": "agent-expert"}),
    ]:
        response = post(queuer, f"/api/tasks/{task['id']}/{move}", body)
        assert_error(response, 409, "invalid_transition", "you neither hold nor created")
    assert Task.objects.get(pk=task["id"]).status == "escalated"
    # A human routes it on, as the task waits for humans; queueing it makes no one its queuer.
    response = post(human, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-expert"})
    assert response.status_code == 200, response.content
    assert Task.objects.get(pk=task["id"]).queued_by is None
