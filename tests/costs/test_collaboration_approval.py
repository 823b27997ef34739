"""A collaboration estimated above a `collaboration_cost` policy waits for a human (issue 37 §1):
202 with the pending decision at REST and as call-tool's result; approved, it starts as the
requester."""

import json

import pytest

from collaboration.models import CollaborationSession
from tasks import services
from tasks.models import PolicyTrigger

from .conftest import auth
from .test_collaboration import specialists, start

pytestmark = pytest.mark.django_db(transaction=True)


def cost_policy(cast, above: str):
    services.policy_create(
        org=cast.org,
        name="Costly sessions wait",
        trigger=PolicyTrigger.COLLABORATION_COST,
        cost_above_usd=above,
    )


def test_a_start_estimated_above_the_policy_waits_and_starts_when_approved(client, cast, fake_llm):
    cost_policy(cast, "0")
    response = start(client, cast.alex_key)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "awaiting_approval"
    decision = body["decision"]
    assert decision["action"]["name"] == "start_collaboration"
    assert decision["action"]["arguments"]["task"] == "Design the cache"
    assert decision["requested_by"] == "agent-alex"
    assert "estimated at up to $" in decision["reason"]
    assert CollaborationSession.objects.count() == 0

    approved = client.post(
        f"/api/decisions/{decision['id']}/approve",
        "{}",
        content_type="application/json",
        **auth(cast.org_key),
    )
    assert approved.json()["outcome"] == {"result": "executed", "reason": ""}
    session = CollaborationSession.objects.get()
    assert session.created_by_agent == cast.alex


def test_a_start_under_the_policy_starts_at_once(client, cast, fake_llm):
    cost_policy(cast, "1000")
    assert start(client, cast.alex_key)["Location"]
    assert CollaborationSession.objects.count() == 1


def test_the_tool_door_meets_the_same_gate(client, cast, fake_llm):
    cost_policy(cast, "0")
    response = client.post(
        "/api/agent-engine/call-tool",
        json.dumps(
            {
                "toolName": "start_collaboration",
                "params": {"task": "Design the cache", "agents": specialists("a", "b")},
            }
        ),
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert response.status_code == 200, response.content
    result = response.json()
    result = result.get("result", result)
    assert result["status"] == "awaiting_approval"
    assert CollaborationSession.objects.count() == 0
