"""The status moves: the lifecycle, the refused transitions, only the assignee moves its task."""

import pytest

from tasks.models import Task
from tests.tasks.conftest import assert_error, create, post


def test_the_assignee_moves_its_task_through_the_lifecycle(cast):
    task = create(cast.human, agent_id="agent-alex").json()
    alex = cast.client(cast.alex)
    url = f"/api/tasks/{task['id']}/status"
    for status in ("in_progress", "blocked", "in_progress", "completed"):
        response = post(alex, url, {"status": status, "note": "ok"})
        assert response.status_code == 200, response.content
        assert response.json()["status"] == status
    assert_error(
        post(alex, url, {"status": "in_progress"}),
        409,
        "invalid_transition",
        "Cannot transition from completed to in_progress",
    )


@pytest.mark.parametrize(
    "start, wanted",
    [
        ("queued", "completed"),
        ("assigned", "completed"),
        ("assigned", "blocked"),
        ("in_progress", "assigned"),
        ("completed", "failed"),
        ("blocked", "completed"),
        ("assigned", "failed"),
        ("blocked", "assigned"),
        ("queued", "in_progress"),
        ("failed", "in_progress"),
    ],
)
def test_disallowed_transitions_are_409(cast, start, wanted):
    task = Task.objects.create(
        organization=cast.org,
        title="t",
        status=start,
        assignee=None if start == "queued" else cast.alex,
    )
    response = post(cast.human, f"/api/tasks/{task.pk}/status", {"status": wanted})
    assert_error(response, 409, "invalid_transition", f"Cannot transition from {start} to {wanted}")


def test_an_agent_cannot_move_someone_elses_task(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/status", {"status": "in_progress"}
    )
    assert_error(response, 409, "invalid_transition", "only the task's assignee")
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-morgan"}
    )
    assert_error(response, 409, "invalid_transition", "only the task's assignee")


@pytest.mark.parametrize("final", ["completed", "failed", "cancelled"])
def test_reassigning_a_finished_task_is_409(cast, final):
    task = Task.objects.create(organization=cast.org, title="t", status=final, assignee=cast.alex)
    response = post(cast.human, f"/api/tasks/{task.pk}/assign", {"agent_id": "agent-sarah"})
    assert_error(response, 409, "invalid_transition", f"Cannot transition from {final} to assigned")
