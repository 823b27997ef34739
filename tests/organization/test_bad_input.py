"""Never a 500 for bad input (issue 8 §3): NUL bytes, lone surrogates, JSON nested too deep,
numbers that do not fit the database and non-ASCII digits answer 400 `invalid` or 404, in the
one error shape, through every door (REST, call-tool, MCP)."""

import json

import pytest
from django.test import Client

from infrastructure.errors import Invalid
from organization import registry
from organization.caller import Caller
from organization.mcp_server.errors import error_for
from organization.models import Agent
from tests.conftest import agent_of
from tests.factories import make_key

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
SURROGATE = "a\ud800b"


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["code"] == code, body
    assert body["error"]
    return body


def raw_client(key) -> Client:
    """A plain Django client: bodies are sent as the bytes we give (JSON escapes included)."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def post_json(client, path, text: str):
    return client.post(path, text.encode(), content_type="application/json")


@pytest.fixture
def sarah_key(demo):
    return make_key(demo, agent_of(demo, "agent-sarah"))


@pytest.fixture
def org_key(demo):
    return make_key(demo)


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize(
    "path, field",
    [
        ("/api/tasks", "title"),
        ("/api/tasks", "description"),
        ("/api/tasks", "agent_id"),
        ("/api/team/roles", "agent_id"),
        ("/api/team/rules", "default_supervisor_agent_id"),
        ("/api/collaborations", "task"),
    ],
)
def test_bad_characters_in_a_json_body_are_400_invalid(org_key, path, field, bad):
    body = {"title": "A task", "task": "Review", "agents": [{"name": "Critic"}], field: bad}
    if path == "/api/team/roles":
        body["role"] = "worker"
    response = post_json(raw_client(org_key), path, json.dumps(body))
    assert_error(response, 400, "invalid")


@pytest.mark.parametrize(
    "agent",
    [
        {"name": "Critic", "focus": SURROGATE},
        {"name": "Critic", "role": NUL},
        {"name": "Critic", "config": {"model": NUL}},
        {"agent_id": SURROGATE},
    ],
)
def test_bad_characters_in_collaboration_agents_are_400_invalid(org_key, agent):
    body = {"task": "Review", "agents": [agent], "context": {"k": "v"}}
    response = post_json(raw_client(org_key), "/api/collaborations", json.dumps(body))
    assert_error(response, 400, "invalid")


def test_bad_characters_in_a_json_key_or_context_are_400_invalid(org_key):
    client = raw_client(org_key)
    for context in ({NUL: "v"}, {"k": [SURROGATE]}):
        body = {"task": "Review", "agents": [{"name": "Critic"}], "context": context}
        assert_error(post_json(client, "/api/collaborations", json.dumps(body)), 400, "invalid")


@pytest.mark.parametrize(
    "path",
    [
        "/api/agents/agent-%00",
        "/api/agents/%00/system-prompt",
        "/api/team/roles/%00",
        "/api/roster?agent=%00",
        "/api/roster?filter=by_expertise&expertise=%00",
        "/api/agents?expertise=%00",
        "/api/tasks?assignee=%00",
        "/api/delegation/recommendation?expertise=%00",
        "/api/collaborations?%00=1",
    ],
)
def test_nul_in_a_path_or_query_string_is_400_invalid(org_key, path):
    assert_error(raw_client(org_key).get(path), 400, "invalid")


def test_bad_characters_through_call_tool_are_400(sarah_key):
    text = json.dumps(
        {"toolName": "create_task", "params": {"title": "A task", "description": SURROGATE}}
    )
    assert_error(
        post_json(raw_client(sarah_key), "/api/agent-engine/call-tool", text), 400, "invalid"
    )


def test_bad_characters_through_mcp_are_a_400_tool_error(demo):
    """MCP's tools/call runs `registry.call_tool` and answers `error_for` what it raises."""
    caller = Caller(organization=demo, agent=agent_of(demo, "agent-sarah"))
    tasks_before = demo.tasks.count()
    for params in ({"title": NUL}, {"title": "A task", "agent_id": SURROGATE}):
        with pytest.raises(Invalid) as refused:
            registry.call_tool(caller, "create_task", params)
        result = error_for(refused.value)
        assert result.is_error is True
        body = json.loads(result.content[0].text)
        assert (body["code"], body["status"]) == ("invalid", 400)
    assert demo.tasks.count() == tasks_before


def test_json_nested_100000_deep_is_400(sarah_key):
    text = '{"toolName": "x", "params": ' + "[" * 100_000 + "]" * 100_000 + "}"
    body = assert_error(
        post_json(raw_client(sarah_key), "/api/agent-engine/call-tool", text), 400, "parse_error"
    )
    assert "nested too deeply" in body["error"]


def test_json_nested_deeper_than_the_guard_allows_is_400_invalid(sarah_key):
    text = json.dumps({"toolName": "create_task", "params": {"title": "x", "notes": []}})
    text = text.replace("[]", "[" * 200 + "]" * 200)
    response = post_json(raw_client(sarah_key), "/api/agent-engine/call-tool", text)
    assert_error(response, 400, "invalid")


@pytest.mark.parametrize(
    "body",
    [
        '{"title": "A task", "urgency": "low", "agent_id": null, "deadline": null,'
        ' "description": "x", "required_expertise": "", "extra": 99999999999999999999}',
        '{"toolName": "escalate_task", "params": {"task_id": 99999999999999999999}}',
    ],
)
def test_numbers_wider_than_a_bigint_are_400_invalid(sarah_key, body):
    path = "/api/tasks" if '"title"' in body else "/api/agent-engine/call-tool"
    assert_error(post_json(raw_client(sarah_key), path, body), 400, "invalid")


def test_ids_in_the_inbox_read_body_that_do_not_fit_are_400(sarah_key):
    response = post_json(
        raw_client(sarah_key), "/api/inbox/read", '{"ids": [99999999999999999999]}'
    )
    assert_error(response, 400, "invalid")
    response = post_json(raw_client(sarah_key), "/api/inbox/read", '{"ids": [9223372036854775807]}')
    assert response.status_code == 200, response.content


def test_an_infinite_number_in_a_json_context_is_400_invalid(org_key):
    text = '{"task": "Review", "agents": [{"name": "Critic"}], "context": {"x": 1e999}}'
    assert_error(post_json(raw_client(org_key), "/api/collaborations", text), 400, "invalid")


@pytest.mark.parametrize("item", ["²", "٣", "99999999999999999999", "0", "-1"])
def test_an_inbox_item_id_that_is_no_database_id_is_404(sarah_key, item):
    response = raw_client(sarah_key).post(f"/api/inbox/{item}/read")
    assert_error(response, 404, "inbox_item_not_found")


@pytest.mark.parametrize("task_id", ["²", "99999999999999999999"])
def test_a_task_id_that_is_no_database_id_is_404(sarah_key, task_id):
    client = raw_client(sarah_key)
    assert_error(client.get(f"/api/tasks/{task_id}"), 404, "task_not_found")
    response = post_json(client, f"/api/tasks/{task_id}/escalate", "{}")
    assert_error(response, 404, "task_not_found")


# --- pagination -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "limit=99999999999999999999",
        "offset=99999999999999999999",
        "limit=abc",
        "limit=0",
        "offset=-1",
        "limit=%C2%B2",
    ],
)
def test_a_limit_or_offset_that_is_no_whole_number_is_400_invalid(sarah_key, query):
    for path in ("/api/agents", "/api/tasks", "/api/inbox", "/api/collaborations"):
        assert_error(raw_client(sarah_key).get(f"{path}?{query}"), 400, "invalid")


def test_a_page_is_capped_at_api_max_page_size(demo, org_key, settings):
    settings.API_MAX_PAGE_SIZE = 3
    client = raw_client(org_key)
    page = client.get("/api/agents?limit=1000").json()
    assert page["count"] > 3
    assert len(page["results"]) == 3
    assert "limit=3" in page["next"]
    assert len(client.get("/api/agents").json()["results"]) == 3
    assert len(client.get("/api/agents?limit=2").json()["results"]) == 2


def test_the_default_maximum_page_is_200(demo, org_key):
    Agent.objects.bulk_create(
        Agent(organization=demo, handle=f"agent-extra-{i}", name=f"Extra {i}") for i in range(200)
    )
    page = raw_client(org_key).get("/api/agents?limit=99999").json()
    assert page["count"] > 200
    assert len(page["results"]) == 200


def test_the_tool_door_s_lists_are_capped_at_api_max_page_size(demo, settings):
    settings.API_MAX_PAGE_SIZE = 2
    assert demo.tasks.count() > 2
    result = registry.call_tool(Caller(organization=demo), "get_my_tasks", {"limit": 500})
    assert result["count"] == 2
