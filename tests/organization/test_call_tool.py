import pytest

from tests.conftest import agent_of

pytestmark = pytest.mark.django_db


def call(client, body):
    return client.post("/api/agent-engine/call-tool", body, format="json")


def test_call_tool_runs_the_roster_as_the_keys_agent(demo, agent_client):
    response = call(
        agent_client(agent_of(demo, "agent-sarah")),
        {
            "toolName": "get_organization_roster",
            "params": {"filter": "by_expertise", "expertise": "PostgreSQL"},
        },
    )
    assert response.status_code == 200
    assert response.json()["agent_context"]["id"] == "agent-sarah"
    assert sorted(c["id"] for c in response.json()["colleagues"]) == [
        "agent-alex",
        "agent-database-lead",
    ]


def test_matching_injected_identity_is_accepted(demo, agent_client):
    response = call(
        agent_client(agent_of(demo, "agent-sarah")),
        {
            "agentId": "agent-sarah",
            "organizationId": "demo",
            "toolName": "get_organization_roster",
            "params": {},
        },
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"agentId": "agent-alex"},
        {"organizationId": "other"},
        {"params": {"agentId": "agent-alex"}},
        {"params": {"organizationId": "999999"}},
    ],
)
def test_a_body_naming_another_identity_is_403(demo, agent_client, body):
    payload = {"toolName": "get_organization_roster", "params": {}}
    payload.update({k: v for k, v in body.items() if k != "params"})
    payload["params"].update(body.get("params", {}))
    response = call(agent_client(agent_of(demo, "agent-sarah")), payload)
    assert response.status_code == 403
    assert response.json()["code"] == "identity_mismatch"


def test_unknown_tool_is_404(demo, agent_client):
    response = call(agent_client(agent_of(demo, "agent-sarah")), {"toolName": "nope"})
    assert response.status_code == 404
    assert response.json()["code"] == "unknown_tool"


def test_bad_params_are_400_naming_the_param(demo, agent_client):
    response = call(
        agent_client(agent_of(demo, "agent-sarah")),
        {"toolName": "get_organization_roster", "params": {"filter": "everyone"}},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "filter" in response.json()["error"]


def test_missing_tool_name_is_400(demo, agent_client):
    response = call(agent_client(agent_of(demo, "agent-sarah")), {"params": {}})
    assert response.status_code == 400
    assert "toolName" in response.json()["error"]


def test_tools_are_listed_with_their_schema(demo, agent_client):
    response = agent_client(agent_of(demo, "agent-sarah")).get("/api/tools")
    assert response.status_code == 200
    roster = next(t for t in response.json() if t["name"] == "get_organization_roster")
    # null too: how a strict-mode model leaves the optional filter out (its default, "all").
    assert roster["inputSchema"]["properties"]["filter"]["enum"] == [
        "all",
        "my_team",
        "available",
        "by_expertise",
        None,
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"agentId": "agent-alex"},  # an organization key acts as no agent
        {"organizationId": "other"},
        {"params": {"agentId": "agent-sarah"}},
    ],
)
def test_an_organization_key_cannot_take_an_identity_from_the_body(
    demo, other_org, org_client, body
):
    payload = {"toolName": "get_organization_roster", "params": {}}
    payload.update({k: v for k, v in body.items() if k != "params"})
    payload["params"].update(body.get("params", {}))
    response = call(org_client(demo), payload)
    assert response.status_code == 403
    assert response.json()["code"] == "identity_mismatch"


def test_an_organization_key_naming_its_own_organization_is_accepted(demo, org_client):
    for org_id in ("demo", demo.pk):
        response = call(
            org_client(demo),
            {"organizationId": org_id, "toolName": "get_organization_roster", "params": {}},
        )
        assert response.status_code == 200, response.content
        assert response.json()["agent_context"] is None


def test_params_null_is_not_given_as_agent_id_null_is(demo, agent_client):
    """A strict-mode client sends null for what it leaves out (agentId, organizationId and a
    tool's optional params are taken so): `"params": null` was 400 `invalid` where leaving
    params out runs the tool with none."""
    client = agent_client(agent_of(demo, "agent-sarah"))
    body = {"toolName": "get_organization_roster", "params": None, "agentId": None}
    response = call(client, body)
    assert response.status_code == 200, response.content
    assert response.json() == call(client, {"toolName": "get_organization_roster"}).json()
    assert response.json()["agent_context"]["id"] == "agent-sarah"
