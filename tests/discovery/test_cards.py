"""A2A Agent Cards, validated against the A2A card schema (protocol 0.3, from the a2a-sdk)."""

import jsonschema
import pytest
from a2a.compat.v0_3.types import AgentCard

from organization.a2a.cards import EXTENSION_URI, INTAKE_EXTENSION_URI
from tasks.models import Task

pytestmark = pytest.mark.django_db

# The a2a-sdk's v0.3 types are generated from the A2A specification's JSON Schema (a2a.json);
# this is that schema's AgentCard, as JSON Schema again.
CARD_SCHEMA = AgentCard.model_json_schema(by_alias=True)


def validate(card: dict) -> None:
    jsonschema.validate(card, CARD_SCHEMA)
    AgentCard.model_validate(card)


def extension_of(card: dict) -> dict:
    (extension,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI]
    return extension["params"]


def test_sarahs_card_is_a_valid_a2a_card(demo, agent_client):
    response = agent_client(demo.agents.get(handle="agent-alex")).get(
        "/api/agents/agent-sarah/card"
    )
    assert response.status_code == 200
    card = response.json()
    validate(card)
    assert card["name"] == "Sarah"
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == "http://testserver/api/tasks"
    assert [s["name"] for s in card["skills"]] == ["React", "TypeScript", "CSS"]
    assert [s["id"] for s in card["skills"]] == ["react", "typescript", "css"]
    assert card["securitySchemes"]["agentOrgKey"]["scheme"] == "bearer"


def test_the_extension_carries_status_workload_team_and_reporting_line(demo, agent_client):
    client = agent_client(demo.agents.get(handle="agent-sarah"))
    sarah = extension_of(client.get("/api/agents/agent-sarah/card").json())
    assert sarah["agent_id"] == "agent-sarah"
    assert sarah["status"] == "active"
    assert sarah["current_workload"] == 3
    assert sarah["workload_capacity"] == 5
    assert sarah["team"] == "Development"
    assert sarah["seniorId"] == "agent-alice"
    assert sarah["hierarchy_role"] == "worker"
    assert sarah["reports"] == []
    alice = extension_of(client.get("/api/agents/agent-alice/card").json())
    assert alice["seniorId"] is None
    assert alice["reports"] == ["agent-sam", "agent-sarah", "agent-alex", "agent-taylor"] or sorted(
        alice["reports"]
    ) == ["agent-alex", "agent-sam", "agent-sarah", "agent-taylor"]
    sam = extension_of(client.get("/api/agents/agent-sam/card").json())
    assert sam["status"] == "offline"


def test_an_agent_without_expertise_or_team_still_has_a_valid_card(acme, cast, agent_client):
    card = agent_client(cast["dmitri"]).get("/api/agents/agent-dmitri/card").json()
    validate(card)
    assert card["skills"] == []
    assert extension_of(card)["team"] is None


def test_duplicate_skill_ids_are_made_unique(acme, agent_client):
    from tests.factories import make_agent

    agent = make_agent(acme, "agent-dupe", expertise=["C++", "C", "c"])
    card = agent_client(agent).get("/api/agents/agent-dupe/card").json()
    validate(card)
    assert len({s["id"] for s in card["skills"]}) == 3


def test_the_card_index_lists_every_agent(demo, org_client, django_assert_max_num_queries):
    client = org_client(demo)
    with django_assert_max_num_queries(4):
        response = client.get("/api/agent-cards")
    body = response.json()
    assert body["count"] == 7
    for card in body["cards"]:
        validate(card)
    names = {extension_of(c)["agent_id"]: c for c in body["cards"]}
    assert sorted(extension_of(names["agent-alice"])["reports"]) == [
        "agent-alex",
        "agent-sam",
        "agent-sarah",
        "agent-taylor",
    ]


def test_an_unknown_agents_card_is_404(demo, org_client):
    response = org_client(demo).get("/api/agents/agent-nobody/card")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_the_card_says_it_is_no_a2a_message_endpoint_and_how_to_send_work(demo, agent_client):
    """`url` is our tasks API, not A2A messaging: the card must say so, and how to send work."""
    client = agent_client(demo.agents.get(handle="agent-alex"))
    card = client.get("/api/agents/agent-sarah/card").json()
    validate(card)
    assert "not as A2A messages" in card["description"]
    (intake,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == INTAKE_EXTENSION_URI]
    assert intake["required"] is True  # a client that ignores it would send A2A messages
    assert "does not implement A2A's message protocol" in intake["description"]
    params = intake["params"]
    assert params["a2a_messaging"] is False
    send = params["send_work"]
    assert (send["method"], send["url"]) == ("POST", card["url"])
    assert send["body"]["agent_id"] == "agent-sarah"
    assert params["mcp_url"] == "http://testserver/mcp"
    assert params["call_tool_url"] == "http://testserver/api/agent-engine/call-tool"
    # Following the card's instructions gives Sarah the work.
    response = client.post(
        send["url"].removeprefix("http://testserver"),
        {**send["body"], "title": "Review the login form"},
        format="json",
    )
    assert response.status_code == 201, response.content
    task = Task.objects.get(title="Review the login form")
    assert task.assignee.handle == "agent-sarah"
