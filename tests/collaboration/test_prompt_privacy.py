"""A colleague's private system prompt never reaches a session an agent started (issue 8).

The fake model answers with its own system prompt, so whatever was sent comes back to the starter.
"""

import pytest

from collaboration.models import CollaborationSession
from collaboration.services import session_create
from tests.collaboration.conftest import human, run
from tests.conftest import agent_of
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)

ALEX_SECRET = "ALEX-PRIVATE: the acquisition closes on Friday."
SARAH_OWN = "SARAH-OWN: answer in short bullet points."


@pytest.fixture
def prompts(acme, fake_llm):
    alex, sarah = agent_of(acme, "agent-alex"), agent_of(acme, "agent-sarah")
    alex.system_prompt, sarah.system_prompt = ALEX_SECRET, SARAH_OWN
    alex.save(update_fields=["system_prompt"])
    sarah.save(update_fields=["system_prompt"])
    # Every call (agents, plan, synthesis) echoes the system prompt it was given.
    fake_llm.on(replies=[Reply(text=lambda call: f"ECHO {call.system}")])
    return fake_llm


def start_over_rest(client, mode="parallel"):
    body = {
        "task": "Plan the Q3 database work",
        "mode": mode,
        "synthesis": "merge",
        "agents": [{"agent_id": "agent-alex"}, {"agent_id": "agent-sarah"}],
    }
    response = client.post("/api/collaborations", body, format="json")
    assert response.status_code == 202, response.content
    return CollaborationSession.objects.get(pk=response.json()["id"])


def answers_seen_by(client, session) -> str:
    body = client.get(f"/api/collaborations/{session.pk}").json()
    assert body["status"] == "completed", (
        body["error"],
        [c["error"] for c in body["contributions"]],
    )
    return "\n".join([body["result"], *(c["response"] for c in body["contributions"])])


@pytest.mark.parametrize("mode", ["parallel", "hierarchical"])
def test_an_agent_starter_never_gets_a_colleagues_custom_prompt(acme, prompts, agent_client, mode):
    sarah = agent_client(agent_of(acme, "agent-sarah"))
    session = run(start_over_rest(sarah, mode=mode))
    seen = answers_seen_by(sarah, session)
    assert "ALEX-PRIVATE" not in seen
    assert all("ALEX-PRIVATE" not in call.system for call in prompts.calls)
    # Alex still takes part with his organizational context; Sarah's own prompt is hers to use.
    alex_calls = prompts.calls_for(agent="agent-alex")
    assert alex_calls and all("YOUR ORGANIZATIONAL CONTEXT" in c.system for c in alex_calls)
    assert "SARAH-OWN" in seen


def test_an_organization_key_starter_gets_every_custom_prompt(acme, prompts, org_client):
    client = org_client(acme)
    session = run(start_over_rest(client))
    seen = answers_seen_by(client, session)
    assert "ALEX-PRIVATE" in seen and "SARAH-OWN" in seen


def test_an_admin_starter_gets_every_custom_prompt(acme, prompts):
    session = run(
        session_create(
            caller=human(acme),
            payload={"task": "t", "synthesis": "merge", "agents": [{"agent_id": "agent-alex"}]},
        )
    )
    assert "ALEX-PRIVATE" in session.contributions.get().response


def test_a_deleted_starter_agent_still_counts_as_an_agent(acme, prompts, agent_client):
    sarah_agent = agent_of(acme, "agent-sarah")
    session = start_over_rest(agent_client(sarah_agent))
    CollaborationSession.objects.filter(pk=session.pk).update(created_by_agent=None)
    session = run(session)
    assert "ALEX-PRIVATE" not in session.contributions.get(agent_key="agent-alex").response


def test_the_tool_door_keeps_colleagues_prompts_private_too(acme, prompts, agent_client):
    sarah = agent_client(agent_of(acme, "agent-sarah"))
    params = {"task": "t", "synthesis": "merge", "agents": [{"agent_id": "agent-alex"}]}
    response = sarah.post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": params},
        format="json",
    )
    assert response.status_code == 200, response.content
    session = run(CollaborationSession.objects.get(pk=response.json()["id"]))
    assert "ALEX-PRIVATE" not in session.contributions.get().response
    assert "YOUR ORGANIZATIONAL CONTEXT" in session.contributions.get().response
