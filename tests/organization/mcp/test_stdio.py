"""MCP over stdio: the SDK's own client launches `python manage.py mcp --key KEY`."""

import asyncio
import subprocess
import sys

import pytest
from django.utils import timezone

from organization import registry
from organization.caller import Caller

from .conftest import BASE_DIR
from .live import data, stdio_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_serves_the_registry_as_the_keys_agent(demo_org, key_of, subprocess_env):
    key = key_of(demo_org, "agent-sarah")

    async def scenario():
        async with stdio_client(key, subprocess_env, str(BASE_DIR), read_timeout_seconds=60) as c:
            tools = (await c.list_tools()).tools
            roster = await c.call_tool(
                "get_organization_roster", {"filter": "by_expertise", "expertise": "PostgreSQL"}
            )
            error = await c.call_tool("get_organization_roster", {"filter": "nope"})
            after = await c.call_tool("get_organization_roster", {"filter": "my_team"})
            return tools, roster, error, after

    tools, roster, error, after = asyncio.run(scenario())
    sarah = demo_org.agents.get(handle="agent-sarah")
    expected = registry.tools_for(Caller(organization=demo_org, agent=sarah))
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (t.name, t.description, t.offered_schema) for t in expected
    ]
    assert data(roster)["agent_context"]["id"] == "agent-sarah"
    assert [c["id"] for c in data(roster)["colleagues"]] == [
        "agent-alex",
        "agent-database-lead",
    ]
    assert error.is_error is True
    assert data(error)["code"] == "invalid"
    assert data(error)["status"] == 400
    assert [c["id"] for c in data(after)["colleagues"]] == ["agent-alex"]


def test_the_key_can_come_from_the_environment(demo_org, key_of, subprocess_env):
    key = key_of(demo_org)
    env = {**subprocess_env, "AGENT_ORG_KEY": key}

    async def scenario():
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(
            command=sys.executable, args=["manage.py", "mcp"], env=env, cwd=str(BASE_DIR)
        )
        async with Client(params, read_timeout_seconds=60) as client:
            return (await client.list_tools()).tools

    names = [t.name for t in asyncio.run(scenario())]
    assert names == sorted(name for name, t in registry.REGISTRY.items() if t.read_only)


@pytest.mark.parametrize("args", [[], ["--key", "ao_000000000000_not-a-real-secret"]])
def test_without_a_valid_key_the_command_refuses_to_start(args, subprocess_env):
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp", *args],
        cwd=BASE_DIR,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert "key" in done.stderr.lower()


def test_real_work_over_stdio(demo_org, key_of, subprocess_env, settings, request):
    """Tasks (created, delegated, a 403 and a 409) and a collaboration, in one stdio session."""
    from django.db import connections

    from organization.models import TeamRule

    settings.LLM_PROVIDER = "offline"  # the worker runs in this process
    env = {
        **subprocess_env,
        "LLM_PROVIDER": "offline",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }
    key = key_of(demo_org, "agent-sarah")

    def require_supervisor():
        # In a thread of its own: close its connection, or it would outlive the test.
        try:
            TeamRule.objects.filter(organization=demo_org).update(require_supervisor_for_tasks=True)
        finally:
            connections.close_all()

    async def scenario():
        async with stdio_client(key, env, str(BASE_DIR), read_timeout_seconds=60) as c:
            created = await c.call_tool(
                "create_task", {"title": "Stdio task", "agent_id": "agent-sarah"}
            )
            task_id = data(created)["id"]
            delegated = await c.call_tool(
                "delegate_task", {"task_id": task_id, "agent_id": "agent-alex"}
            )
            full = await c.call_tool(
                "create_task", {"title": "Overflow", "agent_id": "agent-jordan"}
            )
            await asyncio.to_thread(require_supervisor)
            forbidden = await c.call_tool(
                "create_task", {"title": "Peer", "agent_id": "agent-taylor"}
            )
            started = await c.call_tool(
                "start_collaboration",
                {
                    "task": "Name the service",
                    "agents": [{"agent_id": "agent-alex"}],
                    "synthesis": "merge",
                },
            )
            session_id = data(started)["id"]
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                read = await c.call_tool("get_collaboration", {"session_id": session_id})
                if data(read)["status"] in ("completed", "failed", "cancelled"):
                    break
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.1)
            return created, delegated, full, forbidden, read

    request.getfixturevalue("worker")  # started after the LLM settings above
    created, delegated, full, forbidden, read = asyncio.run(scenario())
    assert data(created)["assignee"] == "agent-sarah"
    assert data(delegated)["assignee"] == "agent-alex"
    assert (data(full)["code"], data(full)["status"]) == (
        "capacity_exceeded",
        409,
    )
    assert (data(forbidden)["code"], data(forbidden)["status"]) == (
        "role_forbidden",
        403,
    )
    assert data(read)["status"] == "completed"
    assert data(read)["result"]


def test_a_key_revoked_while_it_serves_is_refused_at_once(demo_org, key_of, subprocess_env):
    """Every request checks the key again, as /mcp's gate checks each HTTP request."""
    from asgiref.sync import sync_to_async
    from django.db import connections
    from mcp.shared.exceptions import MCPError

    from organization.models import ApiKey

    key = key_of(demo_org, "agent-sarah")

    def revoke():
        try:
            ApiKey.objects.filter(prefix=key.split("_")[1]).update(revoked_at=timezone.now())
        finally:
            connections.close_all()

    async def scenario():
        async with stdio_client(key, subprocess_env, str(BASE_DIR), read_timeout_seconds=60) as c:
            before = await c.call_tool("get_organization_roster", {"filter": "all"})
            await sync_to_async(revoke, thread_sensitive=False)()
            refusals = []
            for call in (
                c.call_tool("get_organization_roster", {"filter": "all"}),
                c.call_tool("create_task", {"title": "After", "agent_id": "agent-sarah"}),
                c.list_tools(),
            ):
                with pytest.raises(MCPError) as refused:
                    await call
                refusals.append((refused.value.message, refused.value.data))
            return before, refusals

    before, refusals = asyncio.run(scenario())
    assert data(before)["agent_context"]["id"] == "agent-sarah"
    assert refusals == 3 * [
        ("Invalid or revoked API key.", {"code": "authentication_failed", "status": 401})
    ]
    assert not demo_org.tasks.filter(title="After").exists()
