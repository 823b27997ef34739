"""Delegate: the decision stored, the chain extended, loops, self-delegation and depth refused."""

import pytest

from infrastructure.errors import Forbidden
from tasks.models import Task, TaskEvent
from tasks.rules import Actor
from tasks.services import task_delegate
from tests.tasks.conftest import assert_error, create, post

HUMAN = Actor("user", "user:tester")


def test_delegation_stores_the_decision_and_extends_the_chain(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah),
        f"/api/tasks/{task['id']}/delegate",
        {
            "agent_id": "agent-alex",
            "primary_reason": "PostgreSQL expertise, same team, 0/5 tasks",
            "fallback": "agent-morgan (cross-team)",
            "reasoning": "Exact match, low workload.",
            "notes": "Straightforward.",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["delegation_chain"] == ["agent-sarah", "agent-alex"]
    event = TaskEvent.objects.filter(task_id=task["id"], kind="delegated").get()
    assert (event.decision, event.primary_choice, event.fallback, event.actor_label) == (
        "DELEGATE",
        "agent-alex",
        "agent-morgan (cross-team)",
        "agent-sarah",
    )
    assert event.before["assignee"] == "agent-sarah" and event.after["assignee"] == "agent-alex"


def test_delegating_back_is_a_loop_naming_who_delegated_it(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    response = post(
        cast.client(cast.alex), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "delegation_loop", "delegated to you by agent-sarah")


def delegate_along(cast, task, hops):
    """Each (agent, handle): that agent delegates the task to the handle, successfully."""
    for agent, to in hops:
        response = post(cast.client(agent), f"/api/tasks/{task['id']}/delegate", {"agent_id": to})
        assert response.status_code == 200, response.content


def test_a_longer_loop_is_caught_too(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    hops = [(cast.sarah, "agent-alex"), (cast.alex, "agent-morgan"), (cast.morgan, "agent-boss")]
    delegate_along(cast, task, hops)
    response = post(
        cast.client(cast.boss), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "delegation_loop", "delegated to you by agent-morgan")


def test_self_delegation_is_409(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "self_delegation")


def test_a_chain_longer_than_the_maximum_depth_is_409(cast):
    cast.rule.max_delegation_depth = 3
    cast.rule.save()
    task = create(cast.human, agent_id="agent-sarah").json()
    delegate_along(cast, task, [(cast.sarah, "agent-alex"), (cast.alex, "agent-morgan")])
    response = post(
        cast.client(cast.morgan), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-boss"}
    )
    assert_error(response, 409, "delegation_too_deep", "maximum delegation depth of 3")


def test_humans_delegate_through_assign_not_delegate(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.human, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    assert_error(response, 403, "agent_required")
    # The rule is the service's, so every door (admin, MCP, …) gets it, not only REST.
    with pytest.raises(Forbidden) as refused:
        task_delegate(task=Task.objects.get(pk=task["id"]), actor=HUMAN, to=cast.alex)
    assert refused.value.code == "agent_required"
    assert Task.objects.get(pk=task["id"]).assignee == cast.sarah
