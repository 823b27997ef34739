"""Benchmark: the stale-queue sweep over 100,000 queued tasks of which 10,000 are stale.

It measures the wall time and SQL query count of `sweep_stale_queued()` (what the Celery beat
job runs: it escalates every stale task with its TaskEvent and inbox item, respecting the
targets' capacity), next to the floor measured in the same run: one bulk UPDATE of the same
10,000 rows. Targets: wall-time ratio <= 10, and <= 10 queries per 1,000 escalated tasks.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops (nothing of the server's other databases is touched):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/sweep.py
    make bench
"""

import argparse
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import analyze, bench_database  # noqa: E402

TARGET_RATIO = 10.0
TARGET_QUERIES_PER_1000 = 10.0


def build(total: int, stale: int):
    """100 agents (10 leads, 90 workers reporting to them), `total` queued tasks, `stale` stale."""
    from django.utils import timezone

    from organization.models import Agent, Organization, TeamRule
    from tasks.models import URGENCY_RANK, Task, TaskStatus, Urgency

    rng = random.Random(7)
    org = Organization.objects.create(slug="bench-sweep", name="Bench sweep")
    TeamRule.objects.create(organization=org)
    leads = Agent.objects.bulk_create(
        [Agent(organization=org, handle=f"agent-lead-{n:02d}", name=f"Lead {n}") for n in range(10)]
    )
    workers = Agent.objects.bulk_create(
        [
            Agent(
                organization=org,
                handle=f"agent-{n:03d}",
                name=f"Worker {n}",
                senior=leads[n % len(leads)],
            )  # fmt: skip
            for n in range(90)
        ]
    )
    now = timezone.now()
    urgencies = list(Urgency)
    stale_positions = set(rng.sample(range(total), stale))
    tasks = []
    for n in range(total):
        urgency = rng.choice(urgencies)
        is_stale = n in stale_positions
        # Stale: waited a day longer than the longest default threshold; fresh: one minute.
        waited = timedelta(hours=48) if is_stale else timedelta(minutes=1)
        tasks.append(
            Task(
                organization=org,
                title=f"queued {n}",
                status=TaskStatus.QUEUED,
                urgency=urgency,
                urgency_rank=URGENCY_RANK[urgency],
                queued_for=workers[(n + 1) % len(workers)],
                queued_by=workers[n % len(workers)],
                queued_at=now - waited,
                delegation_chain=[workers[n % len(workers)].handle],
            )  # fmt: skip
        )
    Task.objects.bulk_create(tasks, batch_size=10_000)
    analyze()
    return org, now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--stale", type=int, default=10_000)
    args = parser.parse_args()

    with bench_database("bench_sweep"):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from tasks.models import InboxItem, Task, TaskEvent, TaskStatus
        from tasks.sweep import stale_queued, sweep_stale_queued

        started = time.perf_counter()
        org, now = build(args.total, args.stale)
        print(
            f"built {args.total} queued tasks ({args.stale} stale) in {time.perf_counter() - started:.1f}s"
        )
        stale_ids = list(stale_queued(now).values_list("pk", flat=True))
        assert len(stale_ids) == args.stale, len(stale_ids)

        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            escalated = sweep_stale_queued(now=now).escalated
            sweep_seconds = time.perf_counter() - t0
        queries = len(ctx.captured_queries)
        assert escalated == args.stale, escalated
        if os.environ.get("BENCH_VERBOSE"):
            slowest = sorted(ctx.captured_queries, key=lambda q: -float(q["time"]))[:8]
            for q in slowest:
                print(f"  {float(q['time']) * 1000:8.1f} ms  {q['sql'][:110]}")
        events = TaskEvent.objects.filter(kind="escalated").count()
        inbox = InboxItem.objects.count()
        assert events == args.stale and inbox == args.stale, (events, inbox)
        assert sweep_stale_queued(now=now).escalated == 0  # idempotent

        assigned = Task.objects.filter(status=TaskStatus.ASSIGNED).count()
        # The floor: one bulk UPDATE of the same rows, in the same run.
        t0 = time.perf_counter()
        Task.objects.filter(pk__in=stale_ids).update(
            status=TaskStatus.ESCALATED, queued_for=None, updated_at=now
        )
        floor_seconds = time.perf_counter() - t0
        print(
            f"sweep: {escalated} escalated ({assigned} assigned to a lead with room, the rest "
            f"queued for them) in {sweep_seconds * 1000:.0f} ms, {queries} queries; "
            f"floor: one bulk UPDATE of the same {len(stale_ids)} rows in {floor_seconds * 1000:.0f} ms"
        )

    ratio = sweep_seconds / floor_seconds
    per_1000 = queries / (escalated / 1000)
    print(f"RESULT sweep ratio={ratio:.2f} (target <= {TARGET_RATIO:g})")
    print(f"RESULT sweep queries_per_1000={per_1000:.2f} (target <= {TARGET_QUERIES_PER_1000:g})")
    return 0 if ratio <= TARGET_RATIO and per_1000 <= TARGET_QUERIES_PER_1000 else 1


if __name__ == "__main__":
    sys.exit(main())
