"""A2A Agent Cards, validated against the A2A card schema (protocol 0.3, from the a2a-sdk)."""

import jsonschema
import pytest
from a2a.compat.v0_3.types import AgentCard
from django.test import override_settings

from organization.a2a.cards import EXTENSION_URI, INTAKE_EXTENSION_URI
from tasks.models import Task
from tests.factories import make_agent, make_org

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
    with django_assert_max_num_queries(5):
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


def test_a_card_shows_a_worktree_only_to_who_shares_it_and_to_humans(agent_client, org_client):
    """Seed 002's worktree isolation holds on the card as on /api/experts: another worktree's
    path (and its expert id) is not told to an agent; a human sees every one."""
    org = make_org("wt")
    make_agent(org, "agent-ivan", worktree_path="/home/build/secret-client/wt-1")
    outsider = make_agent(org, "agent-smerdy", worktree_path="/repo/wt-2")
    neighbour = make_agent(org, "agent-nina", worktree_path="/home/build/secret-client/wt-1")
    client = agent_client(outsider)
    card = client.get("/api/agents/agent-ivan/card")
    assert card.status_code == 200
    assert extension_of(card.json())["worktree_path"] is None
    assert extension_of(card.json())["expert_id"] is None
    assert b"secret-client" not in client.get("/api/agent-cards").content
    for client in (agent_client(neighbour), org_client(org)):
        params = extension_of(client.get("/api/agents/agent-ivan/card").json())
        assert params["worktree_path"] == "/home/build/secret-client/wt-1"
        assert params["expert_id"] == org.agents.get(handle="agent-ivan").pk


def test_a_card_claims_no_push_notifications_even_with_a_webhook(agent_client):
    """A2A's push notifications are configured by the client for its own task, which we do not
    implement; the agent's webhook is the admin's setting, and not told to colleagues."""
    org = make_org("hooks")
    make_agent(org, "agent-hooked", webhook_url="https://hooks.example.com/agent")
    card = agent_client(make_agent(org, "agent-reader")).get("/api/agents/agent-hooked/card")
    assert card.json()["capabilities"]["pushNotifications"] is False


@override_settings(API_MAX_PAGE_SIZE=2)
def test_the_card_index_is_paged_like_every_list(org_client):
    org = make_org("big")
    for n in range(3):
        make_agent(org, f"agent-{n}")
    client = org_client(org)
    first = client.get("/api/agent-cards?limit=5").json()
    assert first["count"] == 3 and len(first["cards"]) == 2 and first["previous"] is None
    second = client.get(first["next"]).json()
    assert [extension_of(c)["agent_id"] for c in second["cards"]] == ["agent-2"]
    assert second["next"] is None
    refused = client.get("/api/agent-cards?limit=abc")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
