"""`GET /api/agents/<id>/system-prompt` and the tool `get_my_context` (seed 001, DESIGN "Data visibility")."""

import pytest

from organization.prompt import system_prompt_for
from tests.conftest import agent_of
from tests.factories import give_tasks, make_admin_user

pytestmark = pytest.mark.django_db


def prompt_of(client, handle):
    return client.get(f"/api/agents/{handle}/system-prompt")


def call(client, params=None):
    body = {"toolName": "get_my_context", "params": params or {}}
    return client.post("/api/agent-engine/call-tool", body, format="json")


def test_an_agent_reads_its_own_system_prompt(demo, agent_client):
    sarah = agent_of(demo, "agent-sarah")
    sarah.system_prompt = "You build the web front end."
    sarah.save()
    response = prompt_of(agent_client(sarah), "agent-sarah")
    assert response.status_code == 200
    assert response.json() == {"system_prompt": system_prompt_for(sarah)}
    assert response.json()["system_prompt"].startswith("You build the web front end.\n\n")
    assert "Your Manager: Alice (ID: agent-alice)" in response.json()["system_prompt"]


def test_an_agent_cannot_read_a_colleagues_system_prompt(demo, agent_client):
    response = prompt_of(agent_client(agent_of(demo, "agent-sarah")), "agent-alex")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_an_organization_key_reads_any_agents_prompt(demo, org_client):
    response = prompt_of(org_client(demo), "agent-alex")
    assert response.status_code == 200
    assert "You are: Alex" in response.json()["system_prompt"]


def test_an_admin_member_reads_any_agents_prompt(demo, anon_client):
    anon_client.force_login(make_admin_user(demo))
    response = prompt_of(anon_client, "agent-jordan")
    assert response.status_code == 200
    assert "You are: Jordan" in response.json()["system_prompt"]


def test_an_unknown_agent_is_404(demo, org_client):
    assert prompt_of(org_client(demo), "agent-nobody").status_code == 404


def test_the_prompt_is_fresh_at_every_call(demo, agent_client):
    alex = agent_of(demo, "agent-alex")
    client = agent_client(alex)
    assert "Current Workload: 1/5 tasks" in prompt_of(client, "agent-alex").json()["system_prompt"]
    give_tasks(alex, 2)
    assert "Current Workload: 3/5 tasks" in prompt_of(client, "agent-alex").json()["system_prompt"]


@pytest.mark.parametrize("params", [None, {"agent": ""}, {"agent": None}, {"agent": "agent-sarah"}])
def test_get_my_context_returns_the_callers_prompt(demo, agent_client, params):
    """A blank or null `agent` is "not given" (what a strict-mode client sends for it)."""
    sarah = agent_of(demo, "agent-sarah")
    response = call(agent_client(sarah), params)
    assert response.status_code == 200
    assert response.json() == {"system_prompt": system_prompt_for(sarah)}


def test_get_my_context_never_shows_a_colleagues_prompt(demo, agent_client):
    response = call(agent_client(agent_of(demo, "agent-sarah")), {"agent": "agent-alex"})
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_get_my_context_with_an_organization_key_names_the_agent(demo, org_client):
    client = org_client(demo)
    missing = call(client)
    assert missing.status_code == 400
    assert missing.json()["code"] == "agent_required"
    named = call(client, {"agent": "agent-taylor"})
    assert named.status_code == 200
    assert "You are: Taylor" in named.json()["system_prompt"]


def test_get_my_context_is_listed_in_the_registry(demo, agent_client):
    tools = agent_client(agent_of(demo, "agent-sarah")).get("/api/tools").json()
    assert "get_my_context" in {t["name"] for t in tools}
