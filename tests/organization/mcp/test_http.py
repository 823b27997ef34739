"""MCP over streamable HTTP at /mcp, with the SDK's own client against a live server."""

import pytest
from mcp import MCPError

from organization import registry
from organization.caller import Caller
from organization.models import ApiKey
from organization.registry import REGISTRY, register_tool
from organization.services import api_key_revoke
from tests.conftest import KeyClient

from .live import LiveServer, data, http_client, raw_http, run

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["auto", "legacy"]  # the 2026 per-request protocol, and the initialize handshake


async def list_tools(url, key, mode="auto"):
    async with http_client(url, key, mode=mode, read_timeout_seconds=30) as client:
        return (await client.list_tools()).tools


async def call(url, key, name, arguments, mode="auto"):
    async with http_client(url, key, mode=mode, read_timeout_seconds=30) as client:
        return await client.call_tool(name, arguments)


def test_without_a_key_it_is_401(live_url):
    with raw_http(live_url) as http:
        response = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_with_a_bad_or_revoked_key_it_is_401(live_url, demo_org, key_of):
    plaintext = key_of(demo_org, "agent-sarah")
    api_key_revoke(key=ApiKey.objects.get(prefix=plaintext.split("_")[1]))
    with raw_http(live_url) as http:
        for key in ("ao_000000000000_not-a-real-secret", plaintext, ""):
            response = http.post(
                "/mcp", json={}, headers={"Authorization": f"Bearer {key}".strip()}
            )
            assert response.status_code == 401, key
            assert response.json()["code"] == "authentication_failed"


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def test_the_sdk_client_without_a_key_cannot_connect(live_url):
    with pytest.raises(BaseException) as raised:
        run(list_tools(live_url, None))
    assert any(isinstance(e, MCPError) for e in leaves(raised.value))


@pytest.mark.parametrize("mode", MODES)
def test_it_lists_exactly_the_registry_tools(live_url, demo_org, key_of, mode):
    tools = run(list_tools(live_url, key_of(demo_org, "agent-sarah"), mode))
    sarah = demo_org.agents.get(handle="agent-sarah")
    expected = registry.tools_for(Caller(organization=demo_org, agent=sarah))
    assert [t.name for t in tools] == [t.name for t in expected]
    for served, tool in zip(tools, expected, strict=True):
        assert served.description == tool.description
        assert served.input_schema == tool.offered_schema
        assert served.annotations.read_only_hint is tool.read_only
        assert served.title == served.annotations.title == tool.title
        hints = served.annotations.model_dump(by_alias=True, exclude_none=True)
        assert hints == tool.annotations()


def test_a_strict_mode_client_may_send_null_for_optional_arguments(live_url, demo_org, key_of):
    # OpenAI's strict mode (and the Agents SDK) send null for each optional param left out.
    arguments = {
        "title": "Strict",
        "description": None,
        "urgency": None,
        "deadline": None,
        "agent_id": None,
        "required_expertise": None,
    }
    result = run(call(live_url, key_of(demo_org, "agent-sarah"), "create_task", arguments))
    assert result.is_error is False, data(result)
    assert data(result)["title"] == "Strict"
    assert data(result)["urgency"] == "normal"


def test_a_key_used_only_over_mcp_records_its_last_use(live_url, demo_org, key_of):
    plaintext = key_of(demo_org, "agent-sarah")
    key = ApiKey.objects.get(prefix=plaintext.split("_")[1])
    assert key.last_used_at is None
    run(list_tools(live_url, plaintext))
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_the_mcp_listing_matches_the_rest_listing(live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-sarah")
    rest = KeyClient(key).get("/api/tools").json()
    tools = run(list_tools(live_url, key))
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (t["name"], t["description"], t["inputSchema"]) for t in rest
    ]


@pytest.mark.parametrize("mode", MODES)
def test_get_organization_roster_as_sarah(live_url, demo_org, key_of, mode):
    key = key_of(demo_org, "agent-sarah")
    result = run(
        call(
            live_url,
            key,
            "get_organization_roster",
            {"filter": "by_expertise", "expertise": "PostgreSQL"},
            mode,
        )
    )
    assert result.is_error is False
    roster = data(result)
    assert roster["agent_context"]["id"] == "agent-sarah"
    assert roster["agent_context"]["status"] == "active"
    assert [c["id"] for c in roster["colleagues"]] == ["agent-alex", "agent-database-lead"]
    rest = KeyClient(key).post(
        "/api/agent-engine/call-tool",
        {
            "toolName": "get_organization_roster",
            "params": {"filter": "by_expertise", "expertise": "PostgreSQL"},
        },
        format="json",
    )
    assert rest.json() == roster


@pytest.mark.parametrize("mode", MODES)
def test_a_domain_error_is_a_tool_error_and_the_session_goes_on(live_url, demo_org, key_of, mode):
    key = key_of(demo_org, "agent-sarah")

    async def scenario():
        async with http_client(live_url, key, mode=mode) as client:
            bad = await client.call_tool("get_organization_roster", {"filter": "by_expertise"})
            unknown = await client.call_tool("no_such_tool", {})
            good = await client.call_tool("get_organization_roster", {"filter": "all"})
            return bad, unknown, good

    bad, unknown, good = run(scenario())
    assert bad.is_error is True
    assert data(bad) == {
        "success": False,
        "error": "filter 'by_expertise' requires the 'expertise' parameter.",
        "code": "invalid_filter",
        "status": 400,
    }
    assert bad.content[0].type == "text"
    assert unknown.is_error is True
    assert data(unknown)["code"] == "unknown_tool"
    assert data(unknown)["status"] == 404
    assert good.is_error is False
    assert len(data(good)["colleagues"]) == 6


def test_arguments_naming_another_agent_are_403(live_url, demo_org, key_of):
    result = run(
        call(
            live_url,
            key_of(demo_org, "agent-sarah"),
            "get_organization_roster",
            {"agentId": "agent-alex"},
        )
    )
    assert result.is_error is True
    assert data(result)["code"] == "identity_mismatch"
    assert data(result)["status"] == 403


@pytest.fixture
def write_tool():
    """A tool registered at run time: it must appear on MCP without any MCP-side change."""

    @register_tool(
        "test_touch_agent",
        "A test tool that writes (not read-only).",
        {"type": "object", "properties": {"note": {"type": "string"}}},
        read_only=False,
    )
    def touch(caller, params):
        return {"touched_by": caller.agent.handle, "note": params.get("note")}

    yield "test_touch_agent"
    REGISTRY.pop("test_touch_agent", None)


def test_a_tool_added_to_the_registry_is_served(live_url, demo_org, key_of, write_tool):
    key = key_of(demo_org, "agent-alex")
    tools = {t.name: t for t in run(list_tools(live_url, key))}
    assert tools[write_tool].description == "A test tool that writes (not read-only)."
    assert tools[write_tool].annotations.read_only_hint is False
    result = run(call(live_url, key, write_tool, {"note": "hi"}))
    assert data(result) == {"touched_by": "agent-alex", "note": "hi"}


def test_an_organization_key_gets_the_read_only_tools(live_url, demo_org, key_of, write_tool):
    key = key_of(demo_org)
    names = [t.name for t in run(list_tools(live_url, key))]
    assert write_tool not in names
    assert "get_organization_roster" in names
    # Exactly the read-only tools (issue 5): not even those that act as no agent.
    assert names == sorted(name for name, tool in REGISTRY.items() if tool.read_only)
    assert all(REGISTRY[name].read_only or not REGISTRY[name].needs_agent for name in names)
    assert {"create_task", "delegate_task", "start_collaboration"}.isdisjoint(names)
    refused = run(call(live_url, key, write_tool, {}))
    assert refused.is_error is True
    assert data(refused)["code"] == "agent_required"
    assert data(refused)["status"] == 403
    roster = run(call(live_url, key, "get_organization_roster", {"filter": "all"}))
    assert data(roster)["agent_context"] is None
    assert len(data(roster)["colleagues"]) == 7


def open_raw_session(http, key: str) -> dict:
    """Initialize an MCP session by hand with `key`; return the headers that continue it."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key}",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    opened = http.post("/mcp", json=initialize, headers=headers)
    assert opened.status_code == 200
    session = {
        **headers,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "Mcp-Protocol-Version": "2025-06-18",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post("/mcp", json=initialized, headers=session).status_code == 202
    return session


LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture
def stateful_live_url(transactional_db, settings):
    """A server keeping MCP sessions (MCP_STATELESS=false: one worker only)."""
    settings.MCP_STATELESS = False
    with LiveServer() as server:
        yield server.url


def test_a_session_cannot_be_continued_with_another_key(stateful_live_url, demo_org, key_of):
    sarah, alex = key_of(demo_org, "agent-sarah"), key_of(demo_org, "agent-alex")
    with raw_http(stateful_live_url) as http:
        session = open_raw_session(http, sarah)
        assert http.post("/mcp", json=LISTING, headers=session).status_code == 200
        hijack = http.post(
            "/mcp", json=LISTING, headers={**session, "Authorization": f"Bearer {alex}"}
        )
        assert hijack.status_code == 404


@pytest.fixture
def broken_tool():
    """A tool whose handler crashes: the client gets a tool error, the session goes on."""

    @register_tool("test_broken", "A test tool that fails unexpectedly.", read_only=True)
    def broken(caller, params):
        raise RuntimeError("boom: a secret detail that must not leak")

    yield "test_broken"
    REGISTRY.pop("test_broken", None)


def test_an_unexpected_failure_is_a_500_tool_error_not_a_dead_session(
    live_url, demo_org, key_of, broken_tool
):
    key = key_of(demo_org, "agent-sarah")

    async def scenario():
        async with http_client(live_url, key, read_timeout_seconds=30) as client:
            failed = await client.call_tool(broken_tool, {})
            after = await client.call_tool("get_organization_roster", {"filter": "all"})
            return failed, after

    failed, after = run(scenario())
    assert failed.is_error is True
    assert data(failed) == {
        "success": False,
        "error": "The tool failed unexpectedly; the error was logged.",
        "code": "server_error",
        "status": 500,
    }
    assert after.is_error is False
    assert data(after)["agent_context"]["id"] == "agent-sarah"


def test_a_key_revoked_mid_session_is_refused_at_the_next_request(
    stateful_live_url, demo_org, key_of
):
    """Every HTTP request is re-checked: an open session does not outlive its key."""
    plaintext = key_of(demo_org, "agent-sarah")
    with raw_http(stateful_live_url) as http:
        session = open_raw_session(http, plaintext)
        assert http.post("/mcp", json=LISTING, headers=session).status_code == 200
        api_key_revoke(key=ApiKey.objects.get(prefix=plaintext.split("_")[1]))
        refused = http.post("/mcp", json=LISTING, headers=session)
    assert refused.status_code == 401
    assert refused.json()["code"] == "authentication_failed"


def test_by_default_any_worker_answers_any_request_without_a_session(
    transactional_db, demo_org, key_of
):
    """Stateless (the default): `config.serve` runs several workers, each with its own memory;
    a tools/call reaching a worker that never saw an initialize is answered all the same."""
    key = key_of(demo_org, "agent-sarah")
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {key}"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with LiveServer() as one, LiveServer() as other:
        for url in (one.url, other.url):
            with raw_http(url) as http:
                answer = http.post("/mcp", json=listing, headers=headers)
                assert answer.status_code == 200
                assert "mcp-session-id" not in answer.headers
                names = [tool["name"] for tool in answer.json()["result"]["tools"]]
                assert "get_organization_roster" in names
