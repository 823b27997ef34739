"""Issue 5: organization keys get the read-only tools — one rule in the registry, every door.

An organization key sees exactly the read-only tools on `GET /api/tools`, on MCP
(streamable HTTP and stdio) and may call only those: a tool that writes answers 403
`agent_required` when it acts as an agent, `read_only_key` otherwise (start_collaboration).
"""

import asyncio

import pytest

from collaboration.models import CollaborationSession as Session
from organization import registry
from organization.caller import Caller
from organization.models import ApiKey
from tests.conftest import KeyClient
from tests.factories import make_admin_user

from .conftest import BASE_DIR
from .live import data, http_client, stdio_client

pytestmark = pytest.mark.django_db(transaction=True)

START = {"task": "Name the service", "agents": [{"agent_id": "agent-alex"}], "synthesis": "merge"}


def read_only_names() -> list[str]:
    return sorted(t.name for t in registry.REGISTRY.values() if t.read_only)


def writing_names() -> list[str]:
    return sorted(t.name for t in registry.REGISTRY.values() if not t.read_only)


def org_caller(org, key: str) -> Caller:
    return Caller(organization=org, api_key=ApiKey.objects.get(prefix=key.split("_")[1]))


def test_the_registry_has_both_kinds_of_tools():
    """The tests below would prove nothing if every tool were read-only (or none)."""
    assert {"get_organization_roster", "get_collaboration", "recommend_delegate"} <= set(
        read_only_names()
    )
    assert {"create_task", "delegate_task", "start_collaboration", "get_inbox"} <= set(
        writing_names()
    )


def test_one_rule_decides_for_every_kind_of_caller(demo_org, key_of):
    """Agent keys: everything; organization keys: read-only; admin members: + no-agent tools."""
    sarah = Caller(organization=demo_org, agent=demo_org.agents.get(handle="agent-sarah"))
    org_key = org_caller(demo_org, key_of(demo_org))
    member = Caller(organization=demo_org, user=make_admin_user(demo_org))
    everything = sorted(registry.REGISTRY)
    assert [t.name for t in registry.tools_for(sarah)] == everything
    assert [t.name for t in registry.tools_for(org_key)] == read_only_names()
    assert "start_collaboration" in [t.name for t in registry.tools_for(member)]
    assert "create_task" not in [t.name for t in registry.tools_for(member)]


def assert_refused(status: int, body: dict, code: str) -> None:
    assert status == 403, body
    assert body["success"] is False
    assert body["code"] == code


def test_rest_lists_and_calls_only_read_only_tools(demo_org, key_of):
    client = KeyClient(key_of(demo_org))
    listed = client.get("/api/tools")
    assert listed.status_code == 200
    assert [t["name"] for t in listed.json()] == read_only_names()
    assert all(t["readOnly"] is True for t in listed.json())

    def call(name, params):
        return client.post(
            "/api/agent-engine/call-tool", {"toolName": name, "params": params}, format="json"
        )

    started = call("start_collaboration", START)
    assert_refused(started.status_code, started.json(), "read_only_key")
    created = call("create_task", {"title": "x"})
    assert_refused(created.status_code, created.json(), "agent_required")
    # Refused before its params are even read: an org key learns nothing from a 400.
    bad = call("start_collaboration", {})
    assert_refused(bad.status_code, bad.json(), "read_only_key")
    assert not Session.objects.exists()
    roster = call("get_organization_roster", {"filter": "all"})
    assert roster.status_code == 200
    assert len(roster.json()["colleagues"]) == 7


def test_an_agent_key_still_calls_the_tools_that_write(demo_org, key_of):
    client = KeyClient(key_of(demo_org, "agent-sarah"))
    assert [t["name"] for t in client.get("/api/tools").json()] == sorted(registry.REGISTRY)
    started = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": START},
        format="json",
    )
    assert started.status_code == 200, started.content
    assert Session.objects.count() == 1


async def mcp_scenario(client):
    async with client as c:
        tools = (await c.list_tools()).tools
        started = await c.call_tool("start_collaboration", START)
        created = await c.call_tool("create_task", {"title": "x"})
        read = await c.call_tool("get_collaboration", {"session_id": "nope"})
        return tools, started, created, read


def assert_mcp_doors(tools, started, created, read):
    assert [t.name for t in tools] == read_only_names()
    assert all(t.annotations.read_only_hint is True for t in tools)
    assert started.is_error is True
    assert (data(started)["code"], data(started)["status"]) == ("read_only_key", 403)
    assert created.is_error is True
    assert (data(created)["code"], data(created)["status"]) == ("agent_required", 403)
    # A read-only tool runs (and answers its own 404): the session went on after the refusals.
    assert (data(read)["code"], data(read)["status"]) == ("session_not_found", 404)
    assert not Session.objects.exists()


def test_mcp_http_serves_an_organization_key_the_read_only_tools(live_url, demo_org, key_of):
    client = http_client(live_url, key_of(demo_org), read_timeout_seconds=30)
    assert_mcp_doors(*asyncio.run(mcp_scenario(client)))


def test_mcp_stdio_serves_an_organization_key_the_read_only_tools(demo_org, key_of, subprocess_env):
    client = stdio_client(key_of(demo_org), subprocess_env, str(BASE_DIR), read_timeout_seconds=60)
    assert_mcp_doors(*asyncio.run(mcp_scenario(client)))
