"""Benchmark: `get_organization_roster` over MCP streamable HTTP vs. over REST call-tool.

One live server (the whole ASGI application, `config.asgi`'s, under uvicorn on 127.0.0.1),
one organization of 1,000 agents with tasks making their workloads, one agent key. In the
same run, interleaved, it measures the p50 latency of

- MCP: `tools/call get_organization_roster {"filter": "all"}` with the official SDK client
  over streamable HTTP (one client session, as an agent host keeps one), and
- REST: `POST /api/agent-engine/call-tool` with the same tool and params (one keep-alive
  HTTP client),

both with `Authorization: Bearer <agent key>`. Target: MCP p50 <= 1.5 x REST p50.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops (nothing of the server's other databases is touched):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/mcp.py
    make bench
"""

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# This file is named mcp.py: with bench/ first on sys.path, `import mcp` would import itself.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

AGENTS = 1_000
TARGET_RATIO = 1.5
PARAMS = {"filter": "all"}
EXPERTISE = ["PostgreSQL", "React", "AWS", "Docker", "Figma", "Redis", "Terraform", "CSS",
             "TypeScript", "Kubernetes", "Node.js", "MySQL", "API Design", "Planning"]  # fmt: skip


def server_url_and_bench_db() -> tuple[str, str]:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("bench/mcp.py runs on PostgreSQL: set DATABASE_URL=postgres://…")
    parts = urlsplit(url)
    name = f"bench_mcp_{os.getpid()}"
    return urlunsplit(parts._replace(path="/postgres")), urlunsplit(parts._replace(path=f"/{name}"))


def admin_sql(server_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql)


def build_org(size: int) -> tuple[str, int]:
    """`size` agents in 20 teams, with seniors and held tasks; returns (agent key, task count)."""
    from django.db import connection

    from organization.models import Agent, Organization, Team
    from organization.services import api_key_create
    from tasks.models import Task, TaskStatus

    rng = random.Random(size)
    org = Organization.objects.create(slug=f"bench-mcp-{size}", name=f"Bench MCP {size}")
    teams = Team.objects.bulk_create(
        [Team(organization=org, name=f"Team {n:02d}") for n in range(20)]
    )
    agents = Agent.objects.bulk_create(
        [
            Agent(
                organization=org,
                handle=f"agent-{n:05d}",
                name=f"Agent {n}",
                role="Engineer",
                team=teams[n % len(teams)],
                expertise=rng.sample(EXPERTISE, 3),
                is_paused=rng.random() < 0.05,
            )
            for n in range(size)
        ],
        batch_size=2000,
    )
    for n, agent in enumerate(agents[1:], start=1):
        agent.senior = agents[(n - 1) // 10]
    Agent.objects.bulk_update(agents[1:], ["senior"], batch_size=2000)
    held = (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED)
    tasks = [
        Task(
            organization=org,
            title=f"task {agent.handle} {k}",
            status=rng.choice(held + (TaskStatus.COMPLETED,)),
            assignee=agent,
            delegation_chain=[agent.handle],
        )
        for agent in agents
        for k in range(rng.randint(0, 5))
    ]
    Task.objects.bulk_create(tasks, batch_size=5000)
    _, key = api_key_create(organization=org, agent=agents[size // 2], name="bench")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return key, len(tasks)


class LiveServer:
    """uvicorn serving `application` on 127.0.0.1 in a thread of this process."""

    def __init__(self, application):
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(application, lifespan="on", log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


async def measure(url: str, key: str, iterations: int) -> dict:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {key}"}
    transport = streamable_http_client(
        f"{url}/mcp", http_client=create_mcp_http_client(headers=headers)
    )
    body = {"toolName": "get_organization_roster", "params": PARAMS}
    async with (
        Client(transport, read_timeout_seconds=60) as mcp,
        httpx2.AsyncClient(base_url=url, headers=headers, timeout=60) as rest,
    ):

        async def over_mcp() -> int:
            result = await mcp.call_tool("get_organization_roster", PARAMS)
            assert not result.is_error, result.content[0].text[:300]
            return len(json.loads(result.content[0].text)["colleagues"])

        async def over_rest() -> int:
            response = await rest.post("/api/agent-engine/call-tool", json=body)
            assert response.status_code == 200, response.text[:300]
            return len(response.json()["colleagues"])

        colleagues = await over_mcp()
        assert await over_rest() == colleagues
        for _ in range(3):  # warm-up: connections, caches, the first-call imports
            await over_mcp()
            await over_rest()
        mcp_times, rest_times = [], []
        for n in range(iterations):
            # Interleaved, alternating which goes first, so both see the same state.
            order = (over_mcp, over_rest) if n % 2 == 0 else (over_rest, over_mcp)
            for call in order:
                t0 = time.perf_counter()
                await call()
                elapsed = time.perf_counter() - t0
                (mcp_times if call is over_mcp else rest_times).append(elapsed)
    return {
        "colleagues": colleagues,
        "mcp_p50": statistics.median(mcp_times),
        "rest_p50": statistics.median(rest_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--agents", type=int, default=AGENTS)
    args = parser.parse_args()

    server_url, bench_url = server_url_and_bench_db()
    bench_db = urlsplit(bench_url).path.lstrip("/")
    admin_sql(server_url, f'CREATE DATABASE "{bench_db}"')
    try:
        os.environ["DATABASE_URL"] = bench_url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        key, task_count = build_org(args.agents)
        built = time.perf_counter() - started
        connections.close_all()

        from config.asgi import application

        with LiveServer(application) as server:
            r = asyncio.run(measure(server.url, key, args.iterations))
        connections.close_all()
    finally:
        admin_sql(server_url, f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')

    ratio = r["mcp_p50"] / r["rest_p50"]
    print(
        f"{args.agents} agents, {task_count} tasks (built in {built:.1f}s), "
        f"{args.iterations} runs each, {r['colleagues']} colleagues: "
        f"MCP p50 {r['mcp_p50'] * 1000:.1f} ms, REST call-tool p50 {r['rest_p50'] * 1000:.1f} ms"
    )
    print(f"RESULT mcp ratio={ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
