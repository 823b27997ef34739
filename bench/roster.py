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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, build_org, p50  # noqa: E402

SIZES = (1_000, 10_000)
TARGET_RATIO = 2.0


def measure(org, key: str, iterations: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from organization.roster import _ROW_FIELDS
    from organization.selectors import agents_of
    from organization.workload import workload_count

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

    results = {}
    with bench_database("bench_roster"):
        for size in SIZES:
            started = time.perf_counter()
            org, key, task_count = build_org(
                size, slug=f"bench-{size}", name=f"Bench {size}", roles=True
            )
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
