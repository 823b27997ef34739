"""docs/clients.md's stdio snippets (Claude Desktop, Claude Code) run as written on a PostgreSQL
and Redis install: the command, its arguments and the env it passes, with this install's paths,
key and values filled in, launched by the SDK's client as a host launches it (the host's default
environment plus the snippet's env, nothing of the test's). A run it queues reaches Redis."""

import asyncio
import base64
import json
import os
import re
import subprocess
import sys

import pytest
import redis
from django.conf import settings

from organization.models import AgentRuntime
from runtime.models import RUN_AGENT_TASK, Run
from tests.conftest import requires_postgres
from tests.factories import make_agent, make_key, make_org

from .conftest import BASE_DIR, database_url

pytestmark = [requires_postgres(), pytest.mark.django_db(transaction=True)]

CHECKOUT = "/path/to/agent-org"
KEY = "ao_…"


def stdio_snippets() -> dict[str, dict]:
    """Every server with a `command` in the JSON blocks of docs/clients.md, by name."""
    text = (BASE_DIR / "docs" / "clients.md").read_text()
    servers = {}
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        for name, server in json.loads(block).get("mcpServers", {}).items():
            if "command" in server:
                servers[name] = server
    return servers


def install_values(key: str) -> dict[str, str]:
    """This install's value of each variable a snippet may pass."""
    url = database_url()
    if url is None or not os.environ.get("REDIS_URL"):
        pytest.skip("needs PostgreSQL and Redis (DATABASE_URL, REDIS_URL)")
    return {
        "AGENT_ORG_KEY": key,
        "DATABASE_URL": url,
        "REDIS_URL": os.environ["REDIS_URL"],
        "SECRET_KEY": settings.SECRET_KEY,
    }


def as_written(server: dict, values: dict[str, str]) -> tuple[str, list[str], dict[str, str]]:
    """The snippet's command line and env with the placeholders filled in."""

    def fill(text: str) -> str:
        return text.replace(CHECKOUT, str(BASE_DIR)).replace(KEY, values["AGENT_ORG_KEY"])

    env = {name: values[name] for name in server.get("env", {})}
    return fill(server["command"]), [fill(arg) for arg in server["args"]], env


def queued_messages() -> list[dict]:
    """The Celery messages waiting in this install's Redis broker."""
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        messages = []
        for queue in client.scan_iter(match="celery*"):
            if client.type(queue) == b"list":
                messages += [json.loads(raw) for raw in client.lrange(queue, 0, -1)]
        return messages
    finally:
        client.close()


def args_of(message: dict) -> list:
    args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    return args


def test_the_docs_carry_the_claude_desktop_and_claude_code_stdio_snippets():
    servers = stdio_snippets()
    assert set(servers) == {"agent-org", "agent-org-stdio"}
    for server in servers.values():
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(server["env"])


@pytest.mark.parametrize("name", ["agent-org", "agent-org-stdio"])
def test_a_snippet_as_written_queues_a_run_on_the_redis_broker(name):
    from mcp import Client, StdioServerParameters

    org = make_org("acme")
    lena = make_agent(org, "agent-lena", name="Lena")
    alex = make_agent(org, "agent-alex", senior=lena, runtime=AgentRuntime.MANAGED)
    command, args, env = as_written(stdio_snippets()[name], install_values(make_key(org, lena)))
    assert command == sys.executable or os.path.realpath(command) == os.path.realpath(
        sys.executable
    )

    async def scenario():
        # As a host: the SDK's default environment plus the snippet's env; started in "/".
        params = StdioServerParameters(command=command, args=args, env=env, cwd="/")
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool(
                "create_task", {"title": "Tune the orders query", "agent_id": "agent-alex"}
            )

    result = asyncio.run(scenario())
    assert result.is_error is False, result
    (run,) = Run.objects.filter(agent=alex)
    queued = [
        m
        for m in queued_messages()
        if m["headers"]["task"] == RUN_AGENT_TASK and args_of(m) == [run.pk]
    ]
    assert len(queued) == 1, queued_messages()


def test_on_postgresql_the_stdio_server_refuses_to_start_without_a_broker(db):
    values = install_values("ao_x_y")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": values["DATABASE_URL"],
        "SECRET_KEY": values["SECRET_KEY"],
    }
    done = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "mcp", "--key", "ao_x_y"],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "REDIS_URL is not set" in done.stderr
    assert "docs/clients.md" in done.stderr
