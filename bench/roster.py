"""Benchmark: `GET /api/roster` through the full Django + DRF stack vs. a raw fetch + orjson.

For organizations of 1,000 and 10,000 agents (with tasks making their workloads) and the filters
`all`, `available` and `by_expertise`, it measures in the same run, interleaved:

- the stack: `GET /api/roster?filter=...` through Django's test client with a real agent key —
  middleware, URL conf, API-key authentication, throttle, DRF view, the roster service,
  rendering — in this process;
- the floor: the very SQL the roster runs (taken from its queryset once, outside the timing),
  executed by a plain psycopg cursor on a connection of its own, `fetchall()`, and `orjson.dumps`
  of the rows — no Django at all.

Targets (10,000 agents; 1,000 is printed for information): stack p50 / floor p50 <= 1.5 for
each filter, and the same number of SQL queries per request at both sizes.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops (nothing of the server's other databases is touched):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/roster.py
    make bench
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, build_org, p50  # noqa: E402

SIZES = (1_000, 10_000)
TARGET_SIZE = 10_000
# The filters measured, as query parameters (bench.common.EXPERTISE holds "PostgreSQL").
FILTERS = {
    "all": {"filter": "all"},
    "available": {"filter": "available"},
    "by_expertise": {"filter": "by_expertise", "expertise": "PostgreSQL"},
}
TARGET_RATIO = 1.5


def floor_fetch(bench_url: str, org, key: str, params: dict):
    """A function running the roster's own SQL on a raw psycopg cursor, then orjson.dumps.

    The SQL and its parameters are taken from the roster's queryset here, once, and sent as
    Django's backend sends them (config/settings/, DATABASE_PREPARED): parameters bound by
    the server, the statement prepared — here from its first run, the stack's from its fifth —
    so the server runs the same statement with the same plan and the floor pays no planning.
    Without DATABASE_PREPARED, parameters bound client-side (psycopg's ClientCursor), as then.
    """
    import orjson
    import psycopg

    from organization.auth import key_from_plaintext
    from organization.roster import roster_queryset

    agent = key_from_plaintext(key).agent
    sql, sql_params = roster_queryset(org=org, agent=agent, **params).query.sql_with_params()
    from django.conf import settings

    prepared = settings.DATABASES["default"].get("OPTIONS", {}).get("server_side_binding", False)
    factory = psycopg.Cursor if prepared else psycopg.ClientCursor
    conn = psycopg.connect(bench_url, autocommit=True, cursor_factory=factory)

    def floor() -> int:
        with conn.cursor() as cursor:
            cursor.execute(sql, sql_params, prepare=prepared or None)
            rows = cursor.fetchall()
        orjson.dumps(rows)
        return len(rows)

    return floor, conn


def measure(bench_url: str, org, key: str, params: dict, iterations: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    # A host of the default ALLOWED_HOSTS (the test client's "testserver" is refused).
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="localhost")

    def stack() -> bytes:
        response = client.get("/api/roster", params)
        assert response.status_code == 200, response.content[:300]
        return response.content

    floor, floor_conn = floor_fetch(bench_url, org, key, params)
    try:
        import orjson

        body = orjson.loads(stack())  # warm-up; also records the key's last use
        rows = floor()
        # The same rows: the colleagues plus the requester's own (its agent_context).
        assert len(body["colleagues"]) + 1 == rows, (len(body["colleagues"]), rows)
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
    finally:
        floor_conn.close()
    return {
        "colleagues": len(body["colleagues"]),
        "queries": queries,
        "stack_p50": p50(stack_times),
        "floor_p50": p50(floor_times),
        "ratio": p50(stack_times) / p50(floor_times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=0, help="per case (default: 40 / 31)")
    args = parser.parse_args()

    results: dict[tuple[int, str], dict] = {}
    with bench_database("bench_roster") as bench_url:
        for size in SIZES:
            started = time.perf_counter()
            org, key, task_count = build_org(
                size, slug=f"bench-{size}", name=f"Bench {size}", roles=True
            )
            built = time.perf_counter() - started
            iterations = args.iterations or (40 if size <= 1_000 else 31)
            print(
                f"{size:>6} agents, {task_count} tasks (built in {built:.1f}s), {iterations} runs"
            )
            for name, params in FILTERS.items():
                r = measure(bench_url, org, key, params, iterations)
                results[size, name] = r
                print(
                    f"  {name:<13} stack p50 {r['stack_p50'] * 1000:6.1f} ms, "
                    f"floor p50 {r['floor_p50'] * 1000:6.1f} ms, ratio {r['ratio']:.2f}, "
                    f"{r['queries']} queries, {r['colleagues']} colleagues"
                )

    growth = max(
        abs(results[SIZES[-1], f]["queries"] - results[SIZES[0], f]["queries"]) for f in FILTERS
    )
    for name in FILTERS:
        ratio = results[TARGET_SIZE, name]["ratio"]
        print(f"RESULT roster ratio_{TARGET_SIZE}_{name}={ratio:.2f} (target <= {TARGET_RATIO})")
    print(f"RESULT roster query_growth={growth} (target == 0)")
    ok = all(results[TARGET_SIZE, f]["ratio"] <= TARGET_RATIO for f in FILTERS) and growth == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
