"""Benchmark: the REST API's hot paths against a minimal Django view, served as `make run` serves.

One server (`python -m config.serve`, 2 workers, PostgreSQL with its pool, Redis) and wrk
(16 keep-alive connections, 2 threads, 10 s a run), in this order:

- `GET /bench/minimal`: a plain Django view returning a small JSON body, through the same
  server, middleware and settings (bench/bench_settings.py): the floor of any request;
- `GET /api/agents/<id>` with an agent key: authentication, throttle, one agent and its workload;
- `POST /api/tasks/<id>/assign {"agent_id": …}` with an organization key, each request a
  different unassigned task (a wrk Lua script), to a random one of 200 agents with room;
- `POST /bench/assign-floor/<id>`, the same requests on a pool of their own: the API's
  authentication, throttle, body and answer around ONE statement in autocommit — no rules,
  no audit row, no inbox item (bench/bench_urls.py): the most any redesign of the move could
  make assign ÷ GET read.

Printed, not targets: the rates and their ratios (minimal ÷ GET, assign ÷ GET, assign ÷ its
floor). Targets, in process: the SQL queries of one GET, one assign and one complete (`POST /api/tasks/<id>/status
{"status": "completed"}` by the holder): <= 2, <= 8, <= 8. Each run reports the client's share
of the CPU; a run where wrk, not the server, was the bottleneck fails the benchmark.

Own database, created and dropped; its Redis keys are deleted:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/api.py
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import analyze, bench_database, redis_cleanup  # noqa: E402
from bench.load import client_verdict, server, wrk  # noqa: E402

AGENTS = 200
POOL = 20_000  # unassigned tasks for the assign run: more than it can take in 10 s
SECONDS = 10
SERVER_ENV = {"API_THROTTLE_RATE": "1000000/second"}  # throttling on, never reached
TARGETS = {
    "queries_per_assign": ("<=", 8),
    "queries_per_complete": ("<=", 8),
    "queries_per_get": ("<=", 2),
}

ASSIGN_LUA = """
local tasks = {TASKS}
local agents = {AGENTS}
local counter = 0
local threads = 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
function init(args)
  math.randomseed(offset + 1)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer KEY"
request = function()
  local task = tasks[(offset + counter * 2) % #tasks + 1]
  counter = counter + 1
  local agent = agents[math.random(#agents)]
  return wrk.format(nil, "{PREFIX}" .. task .. "{SUFFIX}", nil, '{"agent_id":"' .. agent .. '"}')
end
"""


def build():
    from organization.models import Agent, Organization, TeamRule
    from organization.services import api_key_create
    from tasks.models import Task, TaskStatus

    org = Organization.objects.create(slug="bench-api", name="Bench API")
    TeamRule.objects.create(organization=org)
    agents = Agent.objects.bulk_create(
        [
            Agent(organization=org, handle=f"agent-{n:03d}", name=f"Agent {n}",
                  workload_capacity=1000, expertise=["PostgreSQL"])
            for n in range(AGENTS)
        ]
    )  # fmt: skip
    pool, floor_pool = (
        Task.objects.bulk_create(
            [
                Task(organization=org, title=f"{name} {n}", status=TaskStatus.QUEUED)
                for n in range(POOL)
            ],
            batch_size=5000,
        )  # fmt: skip
        for name in ("pool", "floor pool")
    )
    agent_key = api_key_create(organization=org, agent=agents[AGENTS // 2], name="bench")[1]
    org_key = api_key_create(organization=org, name="bench")[1]
    analyze()
    return org, agents, pool, floor_pool, agent_key, org_key


def queries(org, agents, agent_key, org_key) -> dict[str, int]:
    """SQL queries of one request each, through Django's full stack in this process."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tasks.rules import SYSTEM
    from tasks.services import task_create, task_set_status

    holder = agents[AGENTS // 2]
    fresh = task_create(org=org, actor=SYSTEM, title="counted assign")
    held = task_create(org=org, actor=SYSTEM, title="counted complete", assignee=holder)
    task_set_status(task=held, actor=SYSTEM, status="in_progress")
    as_agent = Client(HTTP_AUTHORIZATION=f"Bearer {agent_key}", HTTP_HOST="127.0.0.1")
    as_org = Client(HTTP_AUTHORIZATION=f"Bearer {org_key}", HTTP_HOST="127.0.0.1")
    # Warm: the first request loads more, and a key's first use in a minute records it (one
    # UPDATE a minute per key, not a cost of the request measured).
    as_agent.get(f"/api/agents/{agents[0].handle}")
    as_org.get(f"/api/agents/{agents[0].handle}")

    counts = {}
    requests = {
        "get": lambda: as_agent.get(f"/api/agents/{agents[1].handle}"),
        "assign": lambda: as_org.post(f"/api/tasks/{fresh.pk}/assign",
                                      {"agent_id": agents[2].handle}, "application/json"),
        "complete": lambda: as_agent.post(f"/api/tasks/{held.pk}/status",
                                          {"status": "completed"}, "application/json"),
    }  # fmt: skip
    for name, send in requests.items():
        with CaptureQueriesContext(connection) as captured:
            response = send()
        if response.status_code != 200:
            sys.exit(f"{name} answered {response.status_code}: {response.content[:300]!r}")
        counts[name] = len(captured.captured_queries)
    return counts


def main() -> int:
    with redis_cleanup(), bench_database("bench_api", needs_redis=True):
        org, agents, pool, floor_pool, agent_key, org_key = build()
        counts = queries(org, agents, agent_key, org_key)

        def assign_lua(tasks, prefix: str, suffix: str = "") -> str:
            return (
                ASSIGN_LUA.replace("{TASKS}", "{" + ",".join(str(t.pk) for t in tasks) + "}")
                .replace("{AGENTS}", "{" + ",".join(json.dumps(a.handle) for a in agents) + "}")
                .replace("KEY", org_key)
                .replace("{PREFIX}", prefix)
                .replace("{SUFFIX}", suffix)
            )

        print(f"{AGENTS} agents, {POOL} unassigned tasks; wrk: 16 connections, {SECONDS} s a run")
        with server("serve", env=SERVER_ENV) as live:
            get_path = f"{live.url}/api/agents/{agents[7].handle}"
            wrk(
                "warm-up",
                get_path,
                live,
                seconds=2,
                headers={"Authorization": f"Bearer {agent_key}"},
            )
            minimal = wrk("GET /bench/minimal", f"{live.url}/bench/minimal", live, seconds=SECONDS)
            get = wrk("GET /api/agents/<id>", get_path, live, seconds=SECONDS,
                      headers={"Authorization": f"Bearer {agent_key}"})  # fmt: skip
            assign = wrk("POST /api/tasks/<id>/assign", f"{live.url}/api/tasks", live,
                         seconds=SECONDS, lua=assign_lua(pool, "/api/tasks/", "/assign"))  # fmt: skip
            floor = wrk("POST /bench/assign-floor/<id>", f"{live.url}/bench", live,
                        seconds=SECONDS, lua=assign_lua(floor_pool, "/bench/assign-floor/"))  # fmt: skip
        loads = [minimal, get, assign, floor]
        for load in loads:
            print(load.line())
        errors = sum(load.socket_errors + load.non_2xx for load in loads)

    figures = {
        "queries_per_assign": counts["assign"],
        "queries_per_complete": counts["complete"],
        "queries_per_get": counts["get"],
    }
    print(
        f"  minimal ÷ GET = {minimal.rps / get.rps:.2f}, assign ÷ GET = {assign.rps / get.rps:.2f}, "
        f"assign floor ÷ GET = {floor.rps / get.rps:.2f} (the most a move made of one statement — "
        f"no rules, audit nor inbox — could read), assign ÷ its floor = "
        f"{assign.rps / floor.rps:.2f}"
    )
    status = client_verdict(loads)
    if errors:
        print(f"  {errors} requests failed (socket errors or non-2xx): the figures are not valid")
        status = 1
    for name, value in figures.items():
        op, target = TARGETS[name]
        met = value <= target if op == "<=" else value >= target
        status |= not met
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        print(f"RESULT api {name}={shown} (target {op} {target})")
    return status


if __name__ == "__main__":
    sys.exit(main())
