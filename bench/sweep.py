"""Benchmark: the stale-queue sweep over 100,000 queued tasks of which 10,000 are stale.

It measures `sweep_stale_queued()` (what the Celery beat job runs: it escalates every stale
task with its TaskEvent and inbox item, respecting the targets' capacity) against its floor,
measured in the same run: the statements the sweep cannot avoid — per batch, the UPDATE of the
tasks and the INSERTs of their audit rows and inbox items, with exactly the values the sweep
wrote — run in one transaction per batch directly with psycopg. Between runs the database is
put back as it was (tasks re-queued, events and inbox emptied, vacuumed, checkpointed), and
floor and sweep alternate over five rounds; the ratio is of the best run of each (noise only
adds time), with the medians and each round's ratio printed too.

Targets: the sweep within 2x its statements, and at most 10 queries per 1,000 escalated tasks.

Runs on the PostgreSQL server of DATABASE_URL, in a database of its own that it creates and
drops (nothing of the server's other databases is touched):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test python bench/sweep.py
    make bench
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import analyze, bench_database  # noqa: E402

TARGET_RATIO = 2.0
TARGET_QUERIES_PER_1000 = 10.0

# The task columns the sweep writes (the floor writes the same, from what the sweep wrote).
TASK_COLUMNS = (
    ("status", "varchar"), ("assignee_id", "bigint"), ("queued_for_id", "bigint"),
    ("queued_at", "timestamptz"), ("queued_by_id", "bigint"), ("assigned_at", "timestamptz"),
    ("delegation_chain", "jsonb"), ("updated_at", "timestamptz"),
)  # fmt: skip
EVENT_COLUMNS = (
    ("organization_id", "bigint"), ("task_id", "bigint"), ("kind", "varchar"),
    ("actor_kind", "varchar"), ("actor_agent_id", "bigint"), ("actor_user_id", "integer"),
    ("actor_label", "varchar"), ("recipient_id", "bigint"), ("before", "jsonb"),
    ("after", "jsonb"), ("message", "text"), ("decision", "varchar"),
    ("primary_choice", "varchar"), ("primary_reason", "text"), ("fallback", "text"),
    ("reasoning", "text"), ("wait_time_seconds", "integer"), ("notes", "text"),
    ("cross_team", "boolean"), ("coordination_note", "text"), ("created_at", "timestamptz"),
)  # fmt: skip
INBOX_COLUMNS = (
    ("organization_id", "bigint"), ("agent_id", "bigint"), ("task_id", "bigint"),
    ("kind", "varchar"), ("message", "text"), ("read_at", "timestamptz"),
    ("created_at", "timestamptz"),
)  # fmt: skip


def build(total: int, stale: int):
    """100 agents (10 leads, 90 workers reporting to them), `total` queued tasks, `stale` stale.

    The tasks go in with one INSERT … SELECT FROM unnest (bulk_create took 30 s for 100,000).
    """
    from django.db import connection
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
    stale_positions = set(rng.sample(range(total), stale))
    urgencies = [rng.choice(list(Urgency)) for _ in range(total)]
    # Stale: waited a day longer than the longest default threshold; fresh: one minute.
    waited = [
        timedelta(hours=48) if n in stale_positions else timedelta(minutes=1) for n in range(total)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Task._meta.db_table} (
                organization_id, title, description, required_expertise, urgency, urgency_rank,
                status, delegation_chain, queued_for_id, queued_by_id, queued_at, created_at,
                updated_at)
            SELECT %s, 'queued ' || v.n, '', '', v.urgency, v.rank, %s,
                   jsonb_build_array(v.chain), v.queued_for, v.queued_by, v.queued_at, %s, %s
            FROM unnest(%s::int[], %s::varchar[], %s::smallint[], %s::varchar[], %s::bigint[],
                        %s::bigint[], %s::timestamptz[])
                 AS v(n, urgency, rank, chain, queued_for, queued_by, queued_at)
            """,  # noqa: S608  (the table name is ours)
            [
                org.pk, TaskStatus.QUEUED, now, now,
                list(range(total)),
                [str(u) for u in urgencies],
                [URGENCY_RANK[u] for u in urgencies],
                [workers[n % len(workers)].handle for n in range(total)],
                [workers[(n + 1) % len(workers)].pk for n in range(total)],
                [workers[n % len(workers)].pk for n in range(total)],
                [now - w for w in waited],
            ],
        )  # fmt: skip
    analyze()
    return org, now


# --- putting the database back between runs ---------------------------------------------------


def save_state(conn, ids: list[int]) -> None:
    """Keep the stale tasks' columns as built, for `restore`."""
    names = ", ".join(name for name, _ in TASK_COLUMNS)
    conn.execute(
        f"CREATE TABLE bench_before AS SELECT id, {names} FROM tasks_task WHERE id = ANY(%s)",  # noqa: S608
        [ids],
    )


def restore(conn) -> None:
    """The database as built: the tasks queued again, no events, no inbox items; vacuumed and
    checkpointed, so every run starts from the same state."""
    sets = ", ".join(f"{name} = b.{name}" for name, _ in TASK_COLUMNS)
    conn.execute(f"UPDATE tasks_task AS t SET {sets} FROM bench_before AS b WHERE t.id = b.id")  # noqa: S608
    conn.execute("TRUNCATE tasks_webhookdelivery, tasks_inboxitem, tasks_taskevent")
    conn.execute("VACUUM ANALYZE tasks_task")
    conn.execute("CHECKPOINT")


# --- the floor: the same statements, with the values the sweep wrote ---------------------------


@dataclass
class Batch:
    """One batch's parameters, encoded before the floor is timed: the JSON documents of its
    tasks and events, and its inbox items' JSON members but for the event id (RETURNING's)."""

    tasks: str
    events: str
    inbox: list[tuple[int, str]]  # (task id, members)


def captured_writes(conn, ids: list[int], batch_size: int) -> list[Batch]:
    """What the sweep wrote for `ids`, split as it splits them (pk order, `batch_size` rows)."""
    from psycopg.rows import dict_row

    def rows_of(sql: str, *params) -> list[dict]:
        with conn.cursor(row_factory=dict_row) as cursor:
            return cursor.execute(sql, params).fetchall()

    names = lambda cols: ", ".join(n for n, _ in cols)  # noqa: E731
    tasks = {
        r["id"]: r
        for r in rows_of(f"SELECT id, {names(TASK_COLUMNS)} FROM tasks_task WHERE id = ANY(%s)", ids)
    }  # fmt: skip
    events = {
        r["task_id"]: r for r in rows_of(f"SELECT {names(EVENT_COLUMNS)} FROM tasks_taskevent")
    }
    inbox = {
        r["task_id"]: r for r in rows_of(f"SELECT {names(INBOX_COLUMNS)} FROM tasks_inboxitem")
    }
    hooks = conn.execute("SELECT count(*) FROM tasks_webhookdelivery").fetchone()[0]
    assert hooks == 0, "the floor writes no webhook rows: the bench's agents have no webhook_url"
    ordered = sorted(ids)
    return [
        Batch(
            tasks=_json([tasks[i] for i in chunk]),
            events=_json([events[i] for i in chunk]),
            inbox=[(i, _json(inbox[i])[1:-1]) for i in chunk if i in inbox],
        )
        for chunk in (ordered[k : k + batch_size] for k in range(0, len(ordered), batch_size))
    ]


def _recordset(cols) -> str:
    """Each statement takes its rows as one JSON document (what the sweep does, and the fastest
    form measured: psycopg adapting a Python list per column cost more than the statements)."""
    return f"json_to_recordset(%s::json) AS v({', '.join(f'{n} {t}' for n, t in cols)})"


def _v(cols) -> str:
    return ", ".join(f"v.{n}" for n, _ in cols)


FLOOR_UPDATE = f"""
    UPDATE tasks_task AS t SET {", ".join(f"{n} = v.{n}" for n, _ in TASK_COLUMNS)}
    FROM {_recordset([("id", "bigint"), *TASK_COLUMNS])}
    WHERE t.id = v.id
"""  # noqa: S608
FLOOR_EVENTS = f"""
    INSERT INTO tasks_taskevent ({", ".join(n for n, _ in EVENT_COLUMNS)})
    SELECT {_v(EVENT_COLUMNS)} FROM {_recordset(EVENT_COLUMNS)}
    RETURNING task_id, id
"""  # noqa: S608
FLOOR_INBOX = f"""
    INSERT INTO tasks_inboxitem (event_id, {", ".join(n for n, _ in INBOX_COLUMNS)})
    SELECT {_v([("event_id", "bigint"), *INBOX_COLUMNS])}
    FROM {_recordset([("event_id", "bigint"), *INBOX_COLUMNS])}
"""  # noqa: S608


def _json(rows: list[dict]) -> str:
    return json.dumps(rows, default=datetime.isoformat, separators=(",", ":"))


def run_floor(conn, batches: list[Batch]) -> float:
    """The three statements per batch, one transaction per batch (as the sweep commits); the
    parameters are encoded beforehand, all but the inbox items' event ids."""
    t0 = time.perf_counter()
    for batch in batches:
        with conn.transaction():
            conn.execute(FLOOR_UPDATE, [batch.tasks])
            event_of = dict(conn.execute(FLOOR_EVENTS, [batch.events]).fetchall())
            items = ",".join(f'{{"event_id":{event_of[t]},{m}}}' for t, m in batch.inbox)
            conn.execute(FLOOR_INBOX, [f"[{items}]"])
    return time.perf_counter() - t0


# --- the sweep ---------------------------------------------------------------------------------


def run_sweep(now, expected: int) -> float:
    from tasks.sweep import sweep_stale_queued

    t0 = time.perf_counter()
    escalated = sweep_stale_queued(now=now).escalated
    seconds = time.perf_counter() - t0
    assert escalated == expected, escalated
    return seconds


def check_written(conn, expected: int) -> None:
    events = conn.execute("SELECT count(*) FROM tasks_taskevent WHERE kind = 'escalated'")
    inbox = conn.execute("SELECT count(*) FROM tasks_inboxitem")
    assert (events.fetchone()[0], inbox.fetchone()[0]) == (expected, expected)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--stale", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with bench_database("bench_sweep") as url:
        import psycopg
        from django.conf import settings
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from tasks.models import Task, TaskStatus
        from tasks.sweep import stale_queued, sweep_stale_queued

        started = time.perf_counter()
        org, now = build(args.total, args.stale)
        print(
            f"built {args.total} queued tasks ({args.stale} stale) in "
            f"{time.perf_counter() - started:.1f}s"
        )
        stale_ids = list(stale_queued(now).values_list("pk", flat=True))
        assert len(stale_ids) == args.stale, len(stale_ids)
        batch_size = settings.TASKS_SWEEP_BATCH_SIZE

        with psycopg.connect(url, autocommit=True) as conn:
            save_state(conn, stale_ids)
            restore(conn)
            # A first sweep counts the queries, checks what it wrote, and gives the floor its
            # values; it warms both up and is not timed.
            with CaptureQueriesContext(connection) as ctx:
                run_sweep(now, args.stale)
            queries = len(ctx.captured_queries)
            if os.environ.get("BENCH_VERBOSE"):
                for q in sorted(ctx.captured_queries, key=lambda q: -float(q["time"]))[:10]:
                    print(
                        f"  {float(q['time']) * 1000:8.1f} ms  {' '.join(q['sql'].split())[:100]}"
                    )
            check_written(conn, args.stale)
            assert sweep_stale_queued(now=now).escalated == 0  # idempotent
            assigned = Task.objects.filter(pk__in=stale_ids, status=TaskStatus.ASSIGNED).count()
            batches = captured_writes(conn, stale_ids, batch_size)
            restore(conn)

            sweeps, floors = [], []
            for _ in range(args.rounds):
                floors.append(run_floor(conn, batches))
                check_written(conn, args.stale)
                restore(conn)
                sweeps.append(run_sweep(now, args.stale))
                check_written(conn, args.stale)
                restore(conn)
            conn.execute("DROP TABLE bench_before")

    # Best of the rounds: the machine's noise (other processes, disk syncs) only adds time.
    sweep_s, floor_s = min(sweeps), min(floors)
    ms = lambda xs: " ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    print(
        f"sweep: {args.stale} escalated ({assigned} assigned to a lead with room, the rest queued "
        f"for them) in {len(batches)} batches of {batch_size}, {queries} queries"
    )
    print(
        f"  sweep runs (ms): {ms(sweeps)}; best {sweep_s * 1000:.0f}, "
        f"median {statistics.median(sweeps) * 1000:.0f}"
    )
    print(
        f"  floor runs (ms): {ms(floors)}; best {floor_s * 1000:.0f}, "
        f"median {statistics.median(floors) * 1000:.0f} "
        "(UPDATE + INSERT events + INSERT inbox, one transaction per batch, psycopg)"
    )
    print(
        "  per-round ratios: "
        + " ".join(f"{a / b:.2f}" for a, b in zip(sweeps, floors, strict=True))
    )
    ratio = sweep_s / floor_s
    per_1000 = queries / (args.stale / 1000)
    print(f"RESULT sweep queries_per_1000={per_1000:.2f} (target <= {TARGET_QUERIES_PER_1000:g})")
    print(f"RESULT sweep ratio_vs_same_statements={ratio:.2f} (target <= {TARGET_RATIO:g})")
    return 0 if ratio <= TARGET_RATIO and per_1000 <= TARGET_QUERIES_PER_1000 else 1


if __name__ == "__main__":
    sys.exit(main())
