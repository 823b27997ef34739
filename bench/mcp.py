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
import socket
import sys
import threading
import time
from pathlib import Path

# bench.common also takes bench/ off sys.path: this file is named mcp.py, and with bench/ on
# sys.path `import mcp` (the SDK) would import this script instead.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, build_org, p50  # noqa: E402

AGENTS = 1_000
TARGET_RATIO = 1.5
PARAMS = {"filter": "all"}


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
        "mcp_p50": p50(mcp_times),
        "rest_p50": p50(rest_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--agents", type=int, default=AGENTS)
    args = parser.parse_args()

    os.environ.setdefault("LOG_LEVEL", "WARNING")
    with bench_database("bench_mcp"):
        from django.db import connections

        started = time.perf_counter()
        _, key, task_count = build_org(
            args.agents, slug=f"bench-mcp-{args.agents}", name=f"Bench MCP {args.agents}"
        )
        built = time.perf_counter() - started
        connections.close_all()

        from config.asgi import application

        with LiveServer(application) as server:
            r = asyncio.run(measure(server.url, key, args.iterations))

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
