"""POST /api/tasks: a task created assigned or queued, within the rules (capacity, offline, who)."""

import pytest

from tests.factories import give_tasks, make_agent, make_org
from tests.tasks.conftest import assert_error, create, post


def test_an_agent_creates_a_task_assigned_to_a_colleague(cast):
    response = create(
        cast.client(cast.sarah),
        title="Fix the login form",
        description="It breaks on Safari",
        required_expertise="React",
        urgency="high",
        deadline="2030-01-01T12:00:00Z",
        agent_id="agent-alex",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("title", "urgency", "status", "assignee", "created_by_agent")} == {
        "title": "Fix the login form",
        "urgency": "high",
        "status": "assigned",
        "assignee": "agent-alex",
        "created_by_agent": "agent-sarah",
    }
    assert body["delegation_chain"] == ["agent-sarah", "agent-alex"]
    assert body["queued_for"] is None
    assert body["estimated_wait_seconds"] is None
    assert body["deadline"].startswith("2030-01-01T12:00:00")
    assert set(body) >= {"id", "description", "required_expertise", "created_at", "updated_at"}


def test_without_agent_id_the_task_is_queued_unassigned(cast):
    response = create(cast.human, title="Triage")
    assert response.status_code == 201
    assert response.json()["status"] == "queued"
    assert response.json()["assignee"] is None
    assert response.json()["created_by_agent"] is None


def test_bad_input_is_400(cast):
    assert_error(create(cast.human, title=""), 400, "invalid")
    assert_error(create(cast.human, urgency="whenever"), 400, "invalid", "urgency")
    assert_error(create(cast.human, deadline="tomorrow"), 400, "invalid", "deadline")


def test_unknown_or_foreign_agent_is_404(cast):
    assert_error(create(cast.human, agent_id="agent-nobody"), 404, "agent_not_found")
    make_agent(make_org("elsewhere"), "agent-foreign")
    assert_error(create(cast.human, agent_id="agent-foreign"), 404, "agent_not_found")


def test_a_body_naming_another_agent_as_caller_is_403(cast):
    response = create(cast.client(cast.sarah), agentId="agent-alex")
    assert_error(response, 403, "identity_mismatch")


def test_capacity_is_final(cast):
    give_tasks(cast.alex, 5)
    response = create(cast.human, agent_id="agent-alex")
    assert_error(response, 409, "capacity_exceeded", "5/5")


@pytest.mark.parametrize(
    "status, counts",
    [
        ("assigned", True),
        ("in_progress", True),
        ("blocked", True),
        ("completed", False),
        ("failed", False),
        ("cancelled", False),
    ],
)
def test_workload_counts_assigned_in_progress_and_blocked_tasks_only(cast, status, counts):
    give_tasks(cast.alex, 4)
    give_tasks(cast.alex, 3, status=status)
    response = create(cast.human, agent_id="agent-alex")
    if counts:
        assert_error(response, 409, "capacity_exceeded", "7/5")
    else:
        assert response.status_code == 201, response.content
        assert response.json()["assignee"] == "agent-alex"


def test_an_offline_agent_receives_nothing(cast):
    cast.alex.is_paused = True
    cast.alex.save()
    assert_error(create(cast.human, agent_id="agent-alex"), 409, "agent_offline")


def test_a_human_must_name_the_assignee(cast):
    task = create(cast.human).json()
    assert_error(post(cast.human, f"/api/tasks/{task['id']}/assign", {}), 403, "agent_required")
