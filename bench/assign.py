"""Benchmark: concurrent assign/complete requests over HTTP never break a rule.

Served as `make run` serves (`python -m config.serve`, 2 workers, each with its threads). An
organization of 100 agents (capacity 5, each already holding 2 tasks in progress) and a pool of
unassigned queued tasks. 500 requests are sent at once from 16 client processes, each on one
keep-alive connection: 300 `POST /api/tasks/<id>/assign` to a random agent (organization key)
and 200 `POST /api/tasks/<id>/status {"status": "completed"}` by the holding agent (agent key),
so that many contend for the same agents' capacity. It prints their throughput and latency, and
a plain authenticated `GET /api/agents/<id>` for comparison (the throughput figures that count
are bench/api.py's, measured with wrk).

Then it checks the result from the audit trail: replaying every TaskEvent, no agent ever held
more than its capacity, and every task's history is complete (created first, each event's
`before` is the previous one's `after`, the last `after` is the task's current state).
Target: zero violations.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/assign.py
    make bench
"""

import argparse
import contextlib
import multiprocessing
import random
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, p50, percentile, redis_cleanup  # noqa: E402
from bench.load import server  # noqa: E402

AGENTS = 100
HELD_EACH = 2
ASSIGNS = 300
COMPLETES = 200
CLIENTS = 16  # client processes, each on one keep-alive connection
HELD = {"assigned", "in_progress", "blocked"}


def build():
    """100 agents each holding 2 in-progress tasks (made through the services, so audited)."""
    from organization.models import Agent, Organization, TeamRule
    from organization.services import api_key_create
    from tasks.rules import SYSTEM
    from tasks.services import task_create, task_set_status

    org = Organization.objects.create(slug="bench-assign", name="Bench assign")
    TeamRule.objects.create(organization=org)
    agents = Agent.objects.bulk_create(
        [Agent(organization=org, handle=f"agent-{n:03d}", name=f"Agent {n}") for n in range(AGENTS)]
    )
    keys = {a.handle: api_key_create(organization=org, agent=a, name="bench")[1] for a in agents}
    org_key = api_key_create(organization=org, name="bench")[1]
    held = []
    for agent in agents:
        for k in range(HELD_EACH):
            task = task_create(
                org=org, actor=SYSTEM, title=f"held {agent.handle} {k}", assignee=agent
            )
            task_set_status(task=task, actor=SYSTEM, status="in_progress")
            held.append((task.pk, agent.handle))
    pool = [task_create(org=org, actor=SYSTEM, title=f"pool {n}").pk for n in range(ASSIGNS)]
    return agents, keys, org_key, held, pool


def send_all(base: str, requests: list) -> list[tuple[int, str | None, float]]:
    """One client process: its share of the requests, in order, on one keep-alive connection."""
    import httpx

    results = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for method, path, key, body in requests:
            t0 = time.perf_counter()
            response = client.request(
                method, path, json=body, headers={"Authorization": f"Bearer {key}"}
            )
            elapsed = time.perf_counter() - t0
            code = response.json().get("code") if response.status_code >= 400 else None
            results.append((response.status_code, code, elapsed))
    return results


def fire(requests: list[tuple[str, str, str, dict | None]], base: str) -> tuple[list, float]:
    """Send all requests from CLIENTS client processes (never threads sharing this
    interpreter, never a connection per request); return [(status, code, seconds)], wall time."""
    shares = [requests[n::CLIENTS] for n in range(CLIENTS)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=CLIENTS, mp_context=context) as pool:
        pool.submit(len, []).result()  # the processes are up before the clock starts
        started = time.perf_counter()
        results = [r for share in pool.map(send_all, [base] * CLIENTS, shares) for r in share]
    return results, time.perf_counter() - started


def audit(org_capacity: dict[str, int]) -> tuple[int, int, int]:
    """Replay the audit trail: (capacity violations, incomplete histories, tasks checked)."""
    from tasks.models import Task, TaskEvent

    held = defaultdict(int)
    peak = defaultdict(int)
    history = defaultdict(list)
    for event in TaskEvent.objects.order_by("pk").only("task_id", "kind", "before", "after"):
        history[event.task_id].append(event)
        before, after = event.before or {}, event.after or {}
        was = before.get("assignee") if before.get("status") in HELD else None
        now = after.get("assignee") if after.get("status") in HELD else None
        if was != now:
            if was:
                held[was] -= 1
            if now:
                held[now] += 1
                peak[now] = max(peak[now], held[now])
    capacity_violations = sum(1 for h, p in peak.items() if p > org_capacity.get(h, 5))
    incomplete = 0
    tasks = {t.pk: t for t in Task.objects.select_related("assignee", "queued_for")}
    for pk, task in tasks.items():
        events = history.get(pk, [])
        ok = bool(events) and events[0].kind == "created" and events[0].before == {}
        ok = ok and all(b.before == a.after for a, b in zip(events, events[1:], strict=False))
        state = {
            "status": task.status,
            "assignee": task.assignee.handle if task.assignee else None,
            "queued_for": task.queued_for.handle if task.queued_for else None,
        }
        ok = ok and events[-1].after == state
        incomplete += not ok
    return capacity_violations, incomplete, len(tasks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with (
        redis_cleanup(),
        bench_database("bench_assign", needs_redis=True),
        contextlib.ExitStack() as cleanup,
    ):
        from django.db import connections

        agents, keys, org_key, held, pool = build()
        connections.close_all()
        # 300 assignments with one organization key in a few seconds: measured here is the
        # engine, not the per-key request throttle (API_THROTTLE_RATE).
        live = cleanup.enter_context(server("serve", env={"API_THROTTLE_RATE": "off"}))
        base = live.url
        rng = random.Random(3)

        # Warm both workers' connections and code paths.
        fire([("GET", f"/api/agents/{agents[0].handle}", org_key, None)] * 8, base)

        requests = [
            ("POST", f"/api/tasks/{pk}/assign", org_key, {"agent_id": rng.choice(agents).handle})
            for pk in pool
        ]
        requests += [
            ("POST", f"/api/tasks/{pk}/status", keys[handle], {"status": "completed"})
            for pk, handle in rng.sample(held, COMPLETES)
        ]
        rng.shuffle(requests)
        results, wall = fire(requests, base)
        plain, plain_wall = fire(
            [("GET", f"/api/agents/{rng.choice(agents).handle}", rng.choice(list(keys.values())), None)
             for _ in range(len(requests))],
            base,
        )  # fmt: skip

        outcomes = defaultdict(int)
        for status, code, _ in results:
            outcomes[(status, code)] += 1
        unexpected = {
            k: v for k, v in outcomes.items() if k not in ((200, None), (409, "capacity_exceeded"))
        }
        bad_plain = sum(1 for status, _, _ in plain if status != 200)
        latencies = [s for _, _, s in results]
        plain_latencies = [s for _, _, s in plain]
        throughput = len(results) / wall
        plain_throughput = len(plain) / plain_wall
        print(
            f"assign/complete: {len(results)} requests ({CLIENTS} client processes) in {wall:.2f}s: "
            f"{throughput:.0f} req/s, p50 {p50(latencies) * 1000:.1f} ms, "
            f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms; outcomes "
            + ", ".join(f"{s} {c or 'ok'}: {n}" for (s, c), n in sorted(outcomes.items(), key=str))
        )
        print(
            f"GET /api/agents/<id>: {len(plain)} requests in {plain_wall:.2f}s: "
            f"{plain_throughput:.0f} req/s, p50 {p50(plain_latencies) * 1000:.1f} ms, "
            f"p99 {percentile(plain_latencies, 0.99) * 1000:.1f} ms"
        )
        from organization.models import Agent

        capacity = dict(Agent.objects.values_list("handle", "workload_capacity"))
        over, incomplete, checked = audit(capacity)
        violations = over + incomplete + sum(unexpected.values()) + bad_plain
        print(
            f"audit: {checked} task histories replayed; agents over capacity at any time: {over}; "
            f"incomplete histories: {incomplete}; unexpected answers: {dict(unexpected)}"
        )
        connections.close_all()

    # Throughput is bench/api.py's (wrk); here the requests only need to contend.
    print(f"RESULT assign violations={violations} (target == 0)")
    return 0 if violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
