"""Benchmark: `GET /api/roster?filter=all` through the full Django + DRF stack vs. the floor.

For organizations of 1,000 and 10,000 agents (with tasks making their workloads) it measures
the p50 of the roster request — middleware, URL conf, API-key authentication, DRF view,
rendering, with a real agent key — and the p50 of the floor: one `.values()` query for the
same rows plus `json.dumps` of them, in the same run. Targets: ratio <= 2.0 at both sizes,
and the same number of SQL queries at both sizes.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops (nothing of the server's other databases is touched):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/roster.py
    make bench
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (1_000, 10_000)
TARGET_RATIO = 2.0
EXPERTISE = ["PostgreSQL", "React", "AWS", "Docker", "Figma", "Redis", "Terraform", "CSS",
             "TypeScript", "Kubernetes", "Node.js", "MySQL", "API Design", "Planning"]  # fmt: skip


def server_url_and_bench_db() -> tuple[str, str]:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("bench/roster.py runs on PostgreSQL: set DATABASE_URL=postgres://…")
    parts = urlsplit(url)
    name = f"bench_roster_{os.getpid()}"
    return urlunsplit(parts._replace(path="/postgres")), urlunsplit(parts._replace(path=f"/{name}"))


def admin_sql(server_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql)


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def build_org(size: int):
    """An organization of `size` agents in 20 teams, with seniors, roles and held tasks."""
    from django.db import connection

    from organization.models import Agent, AgentRole, Organization, Team
    from organization.services import api_key_create
    from tasks.models import Task, TaskStatus

    rng = random.Random(size)
    org = Organization.objects.create(slug=f"bench-{size}", name=f"Bench {size}")
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
    AgentRole.objects.bulk_create(
        [AgentRole(agent=a, role="supervisor" if n % 10 == 0 else "worker")
         for n, a in enumerate(agents)],
        batch_size=2000,
    )  # fmt: skip
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
    # Fresh planner statistics, as autovacuum would have them for a live organization.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return org, key, len(tasks)


def measure(org, key: str, iterations: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from organization.roster import _ROW_FIELDS
    from organization.selectors import agents_of, workload_count

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")

    def stack() -> bytes:
        response = client.get("/api/roster", {"filter": "all"})
        assert response.status_code == 200, response.content[:300]
        return response.content

    def floor() -> str:
        rows = list(agents_of(org=org).values(*_ROW_FIELDS, workload=workload_count()))
        return json.dumps(rows, default=str)

    body = json.loads(stack())  # warm-up; also records the key's last use
    floor()
    with CaptureQueriesContext(connection) as ctx:
        stack()
    queries = len(ctx.captured_queries)

    stack_times, floor_times = [], []
    for _ in range(iterations):
        # Interleaved, so both see the same state of caches and machine load.
        t0 = time.perf_counter()
        stack()
        t1 = time.perf_counter()
        floor()
        t2 = time.perf_counter()
        stack_times.append(t1 - t0)
        floor_times.append(t2 - t1)
    return {
        "colleagues": len(body["colleagues"]),
        "queries": queries,
        "stack_p50": p50(stack_times),
        "floor_p50": p50(floor_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=0, help="per size (default: 40 / 15)")
    args = parser.parse_args()

    server_url, bench_url = server_url_and_bench_db()
    bench_db = urlsplit(bench_url).path.lstrip("/")
    admin_sql(server_url, f'CREATE DATABASE "{bench_db}"')
    try:
        os.environ["DATABASE_URL"] = bench_url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        results = {}
        for size in SIZES:
            started = time.perf_counter()
            org, key, task_count = build_org(size)
            built = time.perf_counter() - started
            iterations = args.iterations or (40 if size <= 1_000 else 15)
            r = measure(org, key, iterations)
            results[size] = r
            print(
                f"{size:>6} agents, {task_count} tasks (built in {built:.1f}s), {iterations} runs: "
                f"stack p50 {r['stack_p50'] * 1000:.1f} ms, floor p50 {r['floor_p50'] * 1000:.1f} ms, "
                f"ratio {r['stack_p50'] / r['floor_p50']:.2f}, {r['queries']} queries, "
                f"{r['colleagues']} colleagues"
            )
        from django.db import connections

        connections.close_all()
    finally:
        admin_sql(server_url, f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')

    small, large = results[SIZES[0]], results[SIZES[1]]
    for size in SIZES:
        ratio = results[size]["stack_p50"] / results[size]["floor_p50"]
        print(f"RESULT roster ratio_{size}={ratio:.2f} (target <= {TARGET_RATIO})")
    print(f"RESULT roster query_growth={large['queries'] - small['queries']} (target == 0)")
    ok = (
        all(results[s]["stack_p50"] / results[s]["floor_p50"] <= TARGET_RATIO for s in SIZES)
        and large["queries"] == small["queries"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
