"""Assign and claim: who may take a task, from whose queue."""

import pytest

from tasks.models import Task, TaskEvent
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


def test_an_agent_claims_a_task_queued_for_it(cast):
    task = create(cast.human).json()
    Task.objects.filter(pk=task["id"]).update(queued_for=cast.alex)
    response = post(cast.client(cast.alex), f"/api/tasks/{task['id']}/assign", {})
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"
    assert TaskEvent.objects.filter(task_id=task["id"]).last().kind == "claimed"


@pytest.mark.parametrize("body", [{}, {"agent_id": "agent-sarah"}])
def test_the_agent_that_queued_a_task_for_a_busy_expert_may_take_it_back(cast, body):
    # Sarah created it and queued it for Morgan (full); she may hand it to anyone (assign),
    # so she may also take it herself rather than wait. A delegator that neither created nor
    # queued it may still not take a task from the expert's queue.
    give_tasks(cast.morgan, 5)
    sarah = cast.client(cast.sarah)
    task = create(sarah).json()
    assert (
        post(sarah, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"}).status_code
        == 200
    )
    response = post(sarah, f"/api/tasks/{task['id']}/assign", body)
    assert response.status_code == 200, response.content
    assert (response.json()["assignee"], response.json()["queued_for"]) == ("agent-sarah", None)
    assert TaskEvent.objects.filter(task_id=task["id"]).last().kind == "claimed"

    # Boss creates one for Sarah, Sarah passes it to Alex, Alex queues it for Morgan: Alex (who
    # queued it) may take it back; Sarah, who only passed it on, may not take it from the queue.
    other = create(cast.client(cast.boss), agent_id="agent-sarah").json()
    post(sarah, f"/api/tasks/{other['id']}/assign", {"agent_id": "agent-alex"})
    alex = cast.client(cast.alex)
    assert (
        post(alex, f"/api/tasks/{other['id']}/queue", {"agent_id": "agent-morgan"}).status_code
        == 200
    )
    assert_error(
        post(sarah, f"/api/tasks/{other['id']}/assign", {}),
        409,
        "invalid_transition",
        "can be claimed",
    )
    response = post(alex, f"/api/tasks/{other['id']}/assign", body and {"agent_id": "agent-alex"})
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"


def test_an_agent_cannot_claim_a_task_it_cannot_see(cast):
    task = create(cast.human).json()
    assert_error(
        post(cast.client(cast.alex), f"/api/tasks/{task['id']}/assign", {}), 404, "task_not_found"
    )
