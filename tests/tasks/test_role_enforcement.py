"""Seed 003's TestRoleEnforcement (10 cases) on POST /api/tasks and /assign, plus our extras."""

from tests.tasks.conftest import assert_error, create, post

PEER = "Agent does not have permission to assign tasks to peers"
ESCALATION = "Agent does not have escalation permission"
NO_ROLE = "Agent does not have a role and peer assignment is disabled"


def test_no_enforcement_by_default(cast):
    response = create(cast.client(cast.sarah), agent_id="agent-alex")
    assert response.status_code == 201, response.content
    assert response.json()["assignee"] == "agent-alex"


def test_supervisor_can_assign_to_anyone(cast):
    cast.enforce()
    for handle in ("agent-sarah", "agent-morgan"):
        response = create(cast.client(cast.boss), agent_id=handle)
        assert response.status_code == 201, response.content
        assert response.json()["assignee"] == handle


def test_worker_cannot_assign_to_peer_without_permission(cast):
    cast.enforce(allow_peer=False)
    cast.role(cast.sarah, can_assign_to_peers=True)
    assert_error(
        create(cast.client(cast.sarah), agent_id="agent-alex"), 403, "role_forbidden", PEER
    )
    cast.enforce(allow_peer=True)
    cast.role(cast.sarah, can_assign_to_peers=False)
    assert_error(
        create(cast.client(cast.sarah), agent_id="agent-alex"), 403, "role_forbidden", PEER
    )


def test_worker_can_assign_to_peer_with_permission(cast):
    cast.enforce(allow_peer=True)
    cast.role(cast.sarah, can_assign_to_peers=True)
    response = create(cast.client(cast.sarah), agent_id="agent-alex")
    assert response.status_code == 201, response.content
    assert response.json()["assignee"] == "agent-alex"


def test_worker_can_escalate_to_supervisor(cast):
    cast.enforce()
    response = create(cast.client(cast.sarah), agent_id="agent-boss")
    assert response.status_code == 201, response.content
    assert response.json()["assignee"] == "agent-boss"


def test_worker_cannot_escalate_when_disabled(cast):
    cast.enforce()
    cast.role(cast.sarah, can_escalate_to_supervisor=False)
    response = create(cast.client(cast.sarah), agent_id="agent-boss")
    assert_error(response, 403, "role_forbidden", ESCALATION)


def test_worker_can_assign_to_self(cast):
    cast.enforce()
    response = create(cast.client(cast.sarah), agent_id="agent-sarah")
    assert response.status_code == 201, response.content
    assert response.json()["delegation_chain"] == ["agent-sarah"]


def test_human_created_task_bypasses_enforcement(cast):
    cast.enforce()
    response = create(cast.human, agent_id="agent-alex")
    assert response.status_code == 201, response.content
    assert response.json()["created_by_agent"] is None


def test_enforcement_on_reassign(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    cast.enforce()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"}
    )
    assert_error(response, 403, "role_forbidden", PEER)


def test_human_initiated_reassign_bypasses_enforcement(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    cast.enforce()
    response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"


# --- beyond the seed's ten ---


def test_a_specialist_is_treated_as_a_worker(cast):
    cast.enforce()
    assert_error(
        create(cast.client(cast.morgan), agent_id="agent-alex"), 403, "role_forbidden", PEER
    )
    assert create(cast.client(cast.morgan), agent_id="agent-boss").status_code == 201


def test_no_role_is_a_worker_without_peer_rights(cast):
    from organization.models import AgentRole

    AgentRole.objects.filter(agent=cast.sarah).delete()
    cast.enforce(allow_peer=False)
    assert_error(
        create(cast.client(cast.sarah), agent_id="agent-alex"), 403, "role_forbidden", NO_ROLE
    )
    cast.enforce(allow_peer=True)
    assert_error(
        create(cast.client(cast.sarah), agent_id="agent-alex"), 403, "role_forbidden", PEER
    )
    # …but it may still escalate to a supervisor (can_escalate_to_supervisor defaults to true).
    assert create(cast.client(cast.sarah), agent_id="agent-boss").status_code == 201


def test_escalation_passes_over_a_senior_who_is_no_supervisor_as_the_recommendation_says(cast):
    """Under enforcement a worker may not hand work to a peer senior: the escalation goes on up
    (the default supervisor, else humans), where the recommendation's `escalate_to` points —
    never a 403 that leaves the worker no way to escalate."""
    cast.sarah.senior = cast.alex
    cast.sarah.save()
    sarah = cast.client(cast.sarah)
    task = create(sarah, agent_id="agent-sarah").json()
    cast.enforce(allow_peer=False)
    advice = sarah.get("/api/delegation/recommendation?expertise=Nothing-here").json()
    assert advice["decision"] == "ESCALATE"
    response = post(sarah, f"/api/tasks/{task['id']}/escalate", {"reason": "stuck"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert advice["escalate_to"]["id"] != "agent-alex"
    assert (body["assignee"] or body["queued_for"]) == advice["escalate_to"]["id"]


def test_a_human_created_task_bypasses_enforcement_whoever_passes_it_on(cast):
    """Seed 003: "Human-created tasks (no created_by_agent_id) bypass all role checks" — also
    when the agent it was given delegates it to a peer."""
    cast.enforce(allow_peer=False)
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"


def test_escalation_respects_can_escalate_when_enforced(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    cast.enforce()
    cast.role(cast.sarah, can_escalate_to_supervisor=False)
    response = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    assert_error(response, 403, "role_forbidden", ESCALATION)


def test_delegation_is_checked_by_the_same_rules(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    cast.enforce()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert_error(response, 403, "role_forbidden", PEER)


def test_the_tool_door_is_checked_by_the_same_rules(cast):
    cast.enforce()
    response = post(
        cast.client(cast.sarah),
        "/api/agent-engine/call-tool",
        {"toolName": "create_task", "params": {"title": "x", "agent_id": "agent-alex"}},
    )
    assert_error(response, 403, "role_forbidden", PEER)


def test_queueing_is_checked_by_the_same_rules(cast):
    from tests.factories import give_tasks

    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    give_tasks(cast.alex, 5)
    cast.enforce()
    url = f"/api/tasks/{task['id']}/queue"
    assert_error(
        post(cast.client(cast.sarah), url, {"agent_id": "agent-alex"}), 403, "role_forbidden", PEER
    )
    cast.enforce(allow_peer=True)
    cast.role(cast.sarah, can_assign_to_peers=True)
    response = post(cast.client(cast.sarah), url, {"agent_id": "agent-alex"})
    assert response.status_code == 200, response.content
    assert response.json()["queued_for"] == "agent-alex"


def test_every_tool_door_that_moves_a_task_is_checked_by_the_same_rules(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    cast.enforce()
    for tool in ("assign_task", "delegate_task", "queue_task"):
        response = post(
            cast.client(cast.sarah),
            "/api/agent-engine/call-tool",
            {"toolName": tool, "params": {"task_id": task["id"], "agent_id": "agent-alex"}},
        )
        assert_error(response, 403, "role_forbidden", PEER)
