"""Benchmark: what MCP adds to `get_organization_roster`, against the same tool run in-process.

An organization of 1,000 agents with tasks making their workloads, one agent key. In the same
run, interleaved (alternating which goes first), it measures the p50 latency of

- **MCP**: `tools/call get_organization_roster {"filter": "all"}` with the official SDK client
  over streamable HTTP (one client, as an agent host keeps one) against the service as
  `make run` and production serve it (`python -m config.serve`, its own processes): the Host
  and key checks, the SDK's JSON-RPC, the tool, the JSON text, the client's parsing; and
- **in-process** (the floor): the very tool as that agent in this process —
  `registry.call_tool(caller, "get_organization_roster", {"filter": "all"})` plus the JSON text
  the MCP result carries (`to_json_text`), on a pooled connection, no transport at all.

Target: `mcp overhead_ms` (MCP p50 − in-process p50) <= 10: the milliseconds MCP adds to a call,
whatever the tool costs.

Printed beside it, not a target: the **wire** p50 — the very request the SDK client sent (its
headers and JSON-RPC body, captured from its HTTP client), replayed by a plain keep-alive httpx
client that parses the reply with orjson — which splits what MCP adds into the server's side
(wire − in-process: the key's check, the SDK's JSON-RPC handling, HTTP) and the SDK client's
(MCP − wire).

Own database on the server of DATABASE_URL, created and dropped; its Redis keys are deleted:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/mcp.py
"""

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

# bench.common also takes bench/ off sys.path: this file is named mcp.py, and with bench/ on
# sys.path `import mcp` (the SDK) would import this script instead.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, build_org, p50, redis_cleanup  # noqa: E402
from bench.load import server  # noqa: E402

AGENTS = 1_000
TARGET_OVERHEAD_MS = 10.0
TOOL = "get_organization_roster"
PARAMS = {"filter": "all"}
SERVER_ENV = {"API_THROTTLE_RATE": "1000000/second"}


class McpClientThread:
    """The SDK client on an event loop of its own thread; `call()` runs one timed tool call
    there and returns (seconds, colleagues). The timing is taken inside the loop, so the hop
    between this bench's threads is not counted against MCP."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        self._submit(self._open())
        return self

    def __exit__(self, *exc):
        self._submit(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()

    def _submit(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    async def _open(self):
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = {"Authorization": f"Bearer {self.key}"}
        http_client = create_mcp_http_client(headers=headers)
        http_client.event_hooks = {"request": [self._capture]}
        self.sent = None  # (headers, body) of the SDK client's last tools/call
        transport = streamable_http_client(f"{self.url}/mcp", http_client=http_client)
        self._client_cm = Client(transport, read_timeout_seconds=60)
        # The client's task group must be entered and left by one task: it lives in `_hold`.
        self._opened = asyncio.Event()
        self._closing = asyncio.Event()
        self._holder = asyncio.ensure_future(self._hold())
        await self._opened.wait()

    async def _capture(self, request) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            self.sent = (dict(request.headers), await request.aread())

    async def _hold(self):
        async with self._client_cm as client:
            self._client = client
            self._opened.set()
            await self._closing.wait()

    async def _close(self):
        self._closing.set()
        await self._holder

    async def _timed_call(self) -> tuple[float, int]:
        t0 = time.perf_counter()
        result = await self._client.call_tool(TOOL, PARAMS)
        text = result.content[0].text
        elapsed = time.perf_counter() - t0
        assert not result.is_error, text[:300]
        return elapsed, len(json.loads(text)["colleagues"])

    def call(self) -> tuple[float, int]:
        return self._submit(self._timed_call())


class WireClient:
    """The SDK client's last `tools/call` request replayed by a plain keep-alive httpx client,
    its reply parsed with orjson: the server's side of MCP without the SDK client's."""

    def __init__(self, url: str, sent: tuple[dict, bytes]):
        import httpx

        headers, self.body = sent
        skip = {"host", "content-length", "connection", "accept-encoding", "user-agent"}
        self.headers = {k: v for k, v in headers.items() if k.lower() not in skip}
        self.url, self.client = f"{url}/mcp", httpx.Client(timeout=60)

    def call(self) -> tuple[float, int]:
        import orjson

        t0 = time.perf_counter()
        response = self.client.post(self.url, content=self.body, headers=self.headers)
        assert response.status_code == 200, response.text[:300]
        text = orjson.loads(response.content)["result"]["content"][0]["text"]
        elapsed = time.perf_counter() - t0
        return elapsed, len(json.loads(text)["colleagues"])

    def close(self) -> None:
        self.client.close()


def in_process_call(caller) -> tuple[float, int]:
    from django.db import close_old_connections

    from organization import registry
    from organization.mcp_server.errors import to_json_text

    t0 = time.perf_counter()
    text = to_json_text(registry.call_tool(caller, TOOL, PARAMS))
    close_old_connections()  # back to the pool, as the MCP door does after each call
    elapsed = time.perf_counter() - t0
    return elapsed, len(json.loads(text)["colleagues"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--agents", type=int, default=AGENTS)
    args = parser.parse_args()

    with redis_cleanup(), bench_database("bench_mcp", needs_redis=True):
        from organization.auth import authenticate_key
        from organization.caller import caller_for_key

        started = time.perf_counter()
        _, key, task_count = build_org(
            args.agents, slug=f"bench-mcp-{args.agents}", name=f"Bench MCP {args.agents}"
        )
        built = time.perf_counter() - started
        caller = caller_for_key(authenticate_key(key))

        with server("serve", env=SERVER_ENV) as live, McpClientThread(live.url, key) as mcp:
            colleagues = mcp.call()[1]
            wire = WireClient(live.url, mcp.sent)
            calls = {"mcp": mcp.call, "wire": wire.call, "local": lambda: in_process_call(caller)}
            assert all(call()[1] == colleagues for call in calls.values())
            for _ in range(5):  # warm-up: connections, caches, the first-call imports
                for call in calls.values():
                    call()
            times = {which: [] for which in calls}
            for n in range(args.iterations):
                order = list(calls)[n % 3 :] + list(calls)[: n % 3]  # each goes first in turn
                for which in order:
                    times[which].append(calls[which]()[0])
            wire.close()

    mcp_p50, wire_p50, local_p50 = (p50(times[w]) * 1000 for w in ("mcp", "wire", "local"))
    overhead = mcp_p50 - local_p50
    print(
        f"{args.agents} agents, {task_count} tasks (built in {built:.1f}s), "
        f"{args.iterations} runs each, {colleagues} colleagues: "
        f"MCP p50 {mcp_p50:.1f} ms, in-process p50 {local_p50:.1f} ms"
    )
    print(
        f"wire p50 {wire_p50:.1f} ms (the SDK's request replayed by httpx, orjson-parsed): "
        f"the server's side of MCP {wire_p50 - local_p50:.1f} ms, the SDK client's "
        f"{mcp_p50 - wire_p50:.1f} ms, of the {mcp_p50 - local_p50:.1f} ms MCP adds (not targets)"
    )
    print(f"RESULT mcp overhead_ms={overhead:.1f} (target <= {TARGET_OVERHEAD_MS:g})")
    return 0 if overhead <= TARGET_OVERHEAD_MS else 1


if __name__ == "__main__":
    sys.exit(main())
