"""The MCP Inspector (its CLI, the npm package as published) against our two transports.

A client no one here wrote: it lists the tools and calls them over streamable HTTP at /mcp and
over stdio (`python manage.py mcp`), as a developer trying the server would. It is installed
once under var/node (pinned; npm's registry). Without node and npm the tests skip, except under
CI, where they must run.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys

import pytest

from tasks.models import Task

from .conftest import BASE_DIR

pytestmark = pytest.mark.django_db(transaction=True)

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
HOME = BASE_DIR / "var" / "node" / "inspector-2.12.0"


@pytest.fixture(scope="session")
def inspector() -> str:
    if not shutil.which("npm"):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but node/npm is missing: the MCP Inspector tests must run")
        pytest.skip("node/npm not installed")
    HOME.mkdir(parents=True, exist_ok=True)
    binary = HOME / "node_modules" / ".bin" / "mcp-inspector"
    with open(HOME / ".lock", "w") as lock:  # xdist workers install it once between them
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(HOME),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    INSPECTOR,
                ],
                check=True,
                capture_output=True,
                timeout=600,
            )
    return str(binary)


def cli(inspector: str, *args: str, exit_code: int = 0) -> dict:
    done = subprocess.run(
        [inspector, "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == exit_code, done.stdout[-1500:] + done.stderr[-1500:]
    return json.loads(done.stdout)


def over_http(url: str, key: str) -> list[str]:
    return [f"{url}/mcp", "--transport", "http", "--header", f"Authorization: Bearer {key}"]


def text_of(result: dict) -> dict:
    [block] = result["content"]
    return json.loads(block["text"])


def test_it_lists_and_calls_the_tools_over_http(inspector, live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-sarah")
    listed = cli(inspector, *over_http(live_url, key), "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert {"get_organization_roster", "create_task", "complete_task"} <= names

    roster = cli(
        inspector,
        *over_http(live_url, key),
        "--method",
        "tools/call",
        "--tool-name",
        "get_organization_roster",
        "--tool-arg",
        "filter=all",
    )
    assert not roster.get("isError")
    assert "agent-alex" in {a["id"] for a in text_of(roster)["colleagues"]}

    created = cli(
        inspector,
        *over_http(live_url, key),
        "--method",
        "tools/call",
        "--tool-name",
        "create_task",
        "--tool-arg",
        "title=Rotate the TLS keys",
        "required_expertise=Security",
    )
    task = Task.objects.get(pk=text_of(created)["id"])
    assert (task.title, task.created_by_agent.handle) == ("Rotate the TLS keys", "agent-sarah")


def test_a_refusal_is_the_tools_error_with_our_code(inspector, live_url, demo_org, key_of):
    refused = cli(
        inspector,
        *over_http(live_url, key_of(demo_org, "agent-sarah")),
        "--method",
        "tools/call",
        "--tool-name",
        "get_task",
        "--tool-arg",
        "task_id=987654",
        exit_code=5,
    )
    assert refused["isError"] is True
    assert text_of(refused)["code"] == "task_not_found"  # 5: the CLI's exit code for isError


def test_it_lists_and_calls_the_tools_over_stdio(inspector, demo_org, key_of, subprocess_env):
    key = key_of(demo_org, "agent-sarah")
    env_args = [
        arg
        for name in ("DATABASE_URL", "SECRET_KEY", "REDIS_URL", "PYTHONPATH")
        if name in subprocess_env
        for arg in ("-e", f"{name}={subprocess_env[name]}")
    ]
    server = [
        "--transport",
        "stdio",
        "--cwd",
        str(BASE_DIR),
        *env_args,
        "--",
        sys.executable,
        "manage.py",
        "mcp",
        "--key",
        key,
    ]
    listed = cli(inspector, "--method", "tools/list", *server)
    assert "create_task" in {tool["name"] for tool in listed["tools"]}
    me = cli(inspector, "--method", "tools/call", "--tool-name", "get_my_context", *server)
    assert "agent-sarah" in json.dumps(text_of(me))
