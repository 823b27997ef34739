"""The domain rules on every move: loops and depth wherever a task is passed on, a paused
expert's queue waits, a blocked task may fail (the refused transitions: test_task_status.py)."""

import pytest

from tasks.models import InboxItem, Task
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


@pytest.mark.parametrize("move", ["assign", "queue"])
def test_passing_a_task_back_by_assign_or_queue_is_a_loop(cast, move):
    task = create(cast.human, agent_id="agent-sarah").json()
    delegated = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert delegated.status_code == 200, delegated.content
    if move == "queue":
        give_tasks(cast.sarah, 5)  # busy: queueing for her is otherwise allowed
    response = post(
        cast.client(cast.alex), f"/api/tasks/{task['id']}/{move}", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "delegation_loop", "delegated to you by agent-sarah")


@pytest.mark.parametrize("move", ["assign", "queue"])
def test_passing_a_task_on_by_assign_or_queue_respects_the_maximum_depth(cast, move):
    cast.rule.max_delegation_depth = 2
    cast.rule.save()
    task = create(cast.human, agent_id="agent-sarah").json()
    delegated = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert delegated.status_code == 200, delegated.content
    if move == "queue":
        give_tasks(cast.morgan, 5)
    response = post(
        cast.client(cast.alex), f"/api/tasks/{task['id']}/{move}", {"agent_id": "agent-morgan"}
    )
    assert_error(response, 409, "delegation_too_deep", "maximum delegation depth of 2")


def test_a_paused_expert_takes_nothing_from_its_queue_when_room_frees(cast):
    held = give_tasks(cast.morgan, 5, status="in_progress")
    waiting = create(cast.human, title="Waits for Morgan").json()
    queued = post(cast.human, f"/api/tasks/{waiting['id']}/queue", {"agent_id": "agent-morgan"})
    assert queued.status_code == 200, queued.content
    cast.morgan.is_paused = True
    cast.morgan.save()
    done = post(
        cast.client(cast.morgan), f"/api/tasks/{held[0].pk}/status", {"status": "completed"}
    )
    assert done.status_code == 200, done.content
    task = Task.objects.get(pk=waiting["id"])
    assert (task.status, task.assignee, task.queued_for) == ("queued", None, cast.morgan)


def test_a_blocked_task_may_fail(cast):
    task = Task.objects.create(
        organization=cast.org, title="t", status="blocked", assignee=cast.alex
    )
    response = post(
        cast.client(cast.alex),
        f"/api/tasks/{task.pk}/status",
        {"status": "failed", "note": "Cannot be done"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "failed"


@pytest.mark.parametrize("paused", [False, True])
def test_an_offline_default_supervisor_is_skipped_too(cast, paused):
    """Rule 6: the senior, else the default supervisor, else humans — an offline one skipped."""
    cast.boss.is_paused = paused
    cast.boss.save()
    cast.rule.default_supervisor = cast.boss
    cast.rule.save()
    task = create(cast.human, agent_id="agent-morgan").json()
    cast.morgan.senior = None
    cast.morgan.save()
    response = post(cast.client(cast.morgan), f"/api/tasks/{task['id']}/escalate", {})
    assert response.status_code == 200, response.content
    body = response.json()
    if paused:
        assert (body["status"], body["assignee"]) == ("escalated", None)
    else:
        assert (body["status"], body["assignee"]) == ("assigned", "agent-boss")


@pytest.mark.parametrize("move", ["delegate", "assign", "queue", "escalate"])
def test_an_expert_passing_on_a_task_queued_for_it_joins_its_delegation_chain(cast, move):
    """Rule 4 and visibility: a full supervisor a task is escalated to has it queued for them;
    passing it on from there (it never held it) puts it in the chain, as any move that passes a
    task on does: it still sees the task, hears of its result as its delegator, and the task
    cannot be passed back to it."""
    give_tasks(cast.boss, 5)
    task = create(cast.human, title="Rotate the keys", agent_id="agent-sarah").json()
    escalated = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    assert escalated.json()["queued_for"] == "agent-boss", escalated.content
    boss = cast.client(cast.boss)
    if move == "queue":
        give_tasks(cast.alex, 5)
    if move == "escalate":
        cast.rule.default_supervisor = cast.alex  # the boss's own way up
        cast.rule.save()
    body = {} if move == "escalate" else {"agent_id": "agent-alex"}
    passed = post(boss, f"/api/tasks/{task['id']}/{move}", body)
    assert passed.status_code == 200, passed.content
    # Queued for Alex, it waits: the chain lists who held or passed it on, not who it waits for.
    expected = ["agent-sarah", "agent-boss"] + ([] if move == "queue" else ["agent-alex"])
    assert passed.json()["delegation_chain"] == expected
    assert boss.get(f"/api/tasks/{task['id']}").status_code == 200
    assert boss.get(f"/api/tasks/{task['id']}/comments").status_code == 200


def test_a_task_passed_on_by_the_expert_it_was_queued_for_reports_back_to_that_expert(cast):
    give_tasks(cast.boss, 5)
    task = create(cast.human, title="Rotate the keys", agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    delegated = post(
        cast.client(cast.boss), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert delegated.json()["delegation_chain"] == ["agent-sarah", "agent-boss", "agent-alex"]
    alex = cast.client(cast.alex)
    # Passing it back to the one who passed it on is a loop, naming who did.
    back = post(alex, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-boss"})
    assert_error(back, 409, "delegation_loop", "delegated to you by agent-boss")
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    done = post(alex, f"/api/tasks/{task['id']}/status", {"status": "completed", "result": "Done."})
    assert done.status_code == 200, done.content
    told = InboxItem.objects.filter(task_id=task["id"], kind="status_changed")
    assert list(told.values_list("agent__handle", flat=True)) == ["agent-boss"]
