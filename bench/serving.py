"""Benchmark: is the REST API served as fast as WSGI serves it, and without connection errors?

The same authenticated `GET /api/agents/<id>` (agent key, an organization of 200 agents) is
loaded with wrk (16 keep-alive connections, 2 threads, 15 s a run) against

- `serve`: what `make run` and production run (`python -m config.serve`, 2 workers: ASGI, with
  Django as WSGI in a thread pool and psycopg's connection pool), and
- `gunicorn`: Django's WSGI application under gunicorn, 2 sync workers, the same settings —

alternately, twice each, in the same run; the ratio is of the medians. Then /mcp on `serve`
(an MCP session per wrk thread, `tools/call get_organization_roster` with `filter=my_team`)
for 15 s. Targets: REST as served ÷ gunicorn >= 0.9; no connection errors (socket errors and
5xx answers, all runs). For reference it also loads Django's own ASGI handler under uvicorn
(how the service was served before) once.

Own database, created and dropped; its Redis keys (throttle counters) are deleted:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/serving.py
"""

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, build_org, redis_cleanup  # noqa: E402
from bench.load import client_verdict, server, wrk  # noqa: E402

AGENTS = 200
SECONDS = 15
TARGET_RATIO = 0.9
# Throttling stays on (its cache round trips are part of a request) at a rate no run reaches.
SERVER_ENV = {"API_THROTTLE_RATE": "1000000/second"}

# An MCP session per wrk thread: initialize, then tools/call on every request after it.
MCP_LUA = r"""
local session = nil
local initialize = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}'
local call = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_organization_roster","arguments":{"filter":"my_team"}}}'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Authorization"] = "Bearer KEY"
request = function()
  if session == nil then
    return wrk.format(nil, nil, nil, initialize)
  end
  wrk.headers["Mcp-Session-Id"] = session
  wrk.headers["Mcp-Protocol-Version"] = "2025-06-18"
  return wrk.format(nil, nil, nil, call)
end
response = function(status, headers, body)
  if session == nil and headers["mcp-session-id"] then
    session = headers["mcp-session-id"]
  end
end
"""


def main() -> int:
    with redis_cleanup(), bench_database("bench_serving", needs_redis=True):
        from organization.models import Agent

        org, key, _ = build_org(AGENTS, slug="bench-serving", name="Bench serving")
        agent = Agent.objects.filter(organization=org).order_by("pk")[AGENTS // 3]
        path = f"/api/agents/{agent.handle}"
        auth = {"Authorization": f"Bearer {key}"}
        print(f"{AGENTS} agents; GET {path}, 16 connections, {SECONDS} s a run")

        loads = {"serve": [], "gunicorn": []}
        for _round in range(2):
            for kind in ("gunicorn", "serve"):
                with server(kind, env=SERVER_ENV) as live:
                    load = wrk(f"{kind} GET agent", live.url + path, live, seconds=SECONDS,
                               headers=auth)  # fmt: skip
                    print(load.line())
                    loads[kind].append(load)
        with server("serve", env=SERVER_ENV) as live:
            mcp = wrk("serve /mcp tools/call", live.url + "/mcp", live, seconds=SECONDS,
                      lua=MCP_LUA.replace("KEY", key))  # fmt: skip
            print(mcp.line())
        with server("asgi-django", env=SERVER_ENV) as live:
            before = wrk("(before) Django ASGI GET agent", live.url + path, live, seconds=SECONDS,
                         headers=auth)  # fmt: skip
            print(before.line())

    measured = loads["serve"] + loads["gunicorn"] + [mcp]
    ratio = statistics.median(x.rps for x in loads["serve"]) / statistics.median(
        x.rps for x in loads["gunicorn"]
    )
    # Every answer counts: a 4xx would mean the load measured an error path, not the API.
    errors = sum(x.socket_errors + x.non_2xx for x in measured)
    status = client_verdict(measured)
    print(f"RESULT serving asgi_vs_wsgi_rest={ratio:.2f} (target >= {TARGET_RATIO})")
    print(f"RESULT serving connection_errors={errors} (target == 0)")
    return status or int(ratio < TARGET_RATIO or errors != 0)


if __name__ == "__main__":
    sys.exit(main())
