"""Benchmark: collaborative sessions on real Celery workers against a fake LLM.

Two `celery -A config worker` processes (`-P threads`) on Redis run the sessions; the LLM is
the fake provider server of tests/fake_llm.py (a real HTTP server on 127.0.0.1, OpenAI wire
format, reached through the real `openai` SDK) with a fixed latency per call.

- **Overhead** (fake latency 0.1 s): sequential sessions of 5 agents + a coordinator synthesis,
  one at a time, so every LLM call is on the critical path. overhead_ms_per_call = (the run's
  wall time, `started_at` → `finished_at` as stored, − 6 x 0.1 s) / 6 calls; p50 over the
  sessions. Next to it, its floor measured in the same run: the provider path alone at zero
  latency — `providers.complete("openai", …)` calling the same fake server with no latency, no
  database, no Celery (p50 per call).
- **Queue to start**: from the start request's commit (an on-commit hook registered before the
  service's own) to the worker's session actually starting (`started_at`, set when the worker
  claims it); p50 over the same sessions.
- **Efficiency** (fake latency 1.0 s, issue 4 §5): wall time (created → finished) next to the
  ideal — parallel: ceil(N / max_parallel) x latency + synthesis latency; sequential:
  N x latency + synthesis latency (a merge synthesis makes no LLM call). Then 20 sessions are
  submitted at once and must all complete.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/collaboration.py [--timeline]
    make bench

It creates and drops a database of its own on the server of DATABASE_URL. On the Redis server of
REDIS_URL it claims an empty database of its own (the highest-numbered one with no keys, marked
with a key while in use), points the workers, the broker and the cache at it, and empties it at
the end: it leaves no key behind.
"""

import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# bench.common also takes bench/ off sys.path: this file is named collaboration.py, and with
# bench/ on sys.path `import collaboration` (the app) could import this script instead.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (  # noqa: E402
    ROOT,
    bench_database,
    redis_cleanup,
    start_celery_workers,
    stop_workers,
)

LATENCY = 0.1  # the overhead and queue figures
EFFICIENCY_LATENCY = 1.0  # the efficiency scenarios (issue 4 §5)
SESSIONS = 10
FLOOR_CALLS = 200
TARGET_OVERHEAD_MS = 20.0
TARGET_QUEUE_MS = 30.0
TARGET_PARALLEL = 0.85
TARGET_SEQUENTIAL = 0.9
BURST = 20
WORKERS = 2
QUEUE = f"bench-collab-{os.getpid()}"
# Limits for this run: the scenarios need 6 agents and max_parallel 5; reruns within the hour
# must not meet the per-organization start limit.
LIMITS = {"COLLAB_MAX_AGENTS": "6", "COLLAB_MAX_PARALLEL": "5", "COLLAB_AGENT_TIMEOUT": "30",
          "COLLAB_MAX_STARTS_PER_HOUR": "100000"}  # fmt: skip


# --- workers --------------------------------------------------------------------------------


def start_workers(env: dict, logdir: Path) -> list:
    return start_celery_workers(env, logdir, name="collab", count=WORKERS, concurrency=12,
                                queue=QUEUE)  # fmt: skip


# --- sessions -------------------------------------------------------------------------------


def wait_finished(ids, timeout: float):
    from collaboration.models import CollaborationSession

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = list(CollaborationSession.objects.filter(pk__in=ids))
        if all(s.is_finished for s in sessions):
            return sessions
        time.sleep(0.05)
    return list(CollaborationSession.objects.filter(pk__in=ids))


def agents(n: int) -> list[dict]:
    return [
        {"name": f"specialist-{i}", "role": "reviewer", "focus": f"aspect {i}"} for i in range(n)
    ]


def start_timed(caller, payload: dict):
    """Start a session; returns it and the wall-clock time its start request committed."""
    from django.db import transaction

    from collaboration.services import session_create

    committed = []
    with transaction.atomic():
        # Registered before the service's own hook (the outbox's send): it runs at the commit.
        transaction.on_commit(lambda: committed.append(time.time()))
        session = session_create(caller=caller, payload=payload)
    return session, committed[0]


def run_one(caller, label: str, ideal: float, **payload) -> float:
    from collaboration.services import session_create

    session = session_create(caller=caller, payload={"task": f"Bench: {label}", **payload})
    (done,) = wait_finished([session.pk], timeout=120)
    wall = (done.finished_at - done.created_at).total_seconds() if done.finished_at else math.inf
    efficiency = ideal / wall
    print(
        f"{label:<38} status={done.status:<9} wall={wall:6.3f}s ideal={ideal:5.2f}s "
        f"efficiency={efficiency:.3f}"
    )
    if "--timeline" in sys.argv:
        for event in done.events.order_by("id"):
            offset = (event.created_at - done.created_at).total_seconds()
            print(f"    {offset:6.3f}s {event.name} {event.data.get('agent', '')}")
    return efficiency if done.status == "completed" else 0.0


def overhead_and_queue(caller, fake) -> tuple[float, float]:
    """Sequential sessions of 5 agents + coordinator, one at a time at LATENCY per call:
    (p50 overhead per LLM call, p50 queue-to-start), both in ms."""
    calls = 5 + 1
    overheads, queues = [], []
    for n in range(SESSIONS):
        fake.reset()
        session, committed = start_timed(caller, {
            "task": f"Bench overhead {n}", "agents": agents(5), "mode": "sequential",
            "synthesis": "coordinator",
        })  # fmt: skip
        (done,) = wait_finished([session.pk], timeout=60)
        assert done.status == "completed", (
            done.status, done.error,
            [(c.agent_key, c.status, c.error) for c in done.contributions.order_by("position")],
            [(e.name, e.data) for e in done.events.order_by("id")],
        )  # fmt: skip
        assert len(fake.calls) == calls, len(fake.calls)
        run = (done.finished_at - done.started_at).total_seconds()
        overheads.append((run - calls * LATENCY) / calls * 1000)
        queues.append((done.started_at.timestamp() - committed) * 1000)
        if "--timeline" in sys.argv:
            print(f"  session {n}: queue {queues[-1]:.1f} ms, run {run * 1000:.0f} ms")
    print(
        f"{SESSIONS} sequential sessions (5 agents + coordinator, {calls} calls of "
        f"{LATENCY * 1000:.0f} ms each), one at a time: overhead per call (ms) "
        f"{' '.join(f'{x:.1f}' for x in overheads)}; queue to start (ms) "
        f"{' '.join(f'{x:.1f}' for x in queues)}"
    )
    return statistics.median(overheads), statistics.median(queues)


def provider_floor() -> float:
    """p50 ms of one `providers.complete` call on the fake server at zero latency: the SDK,
    our transport and the HTTP round trip, without database or Celery."""
    from collaboration import providers
    from collaboration.providers import LLMRequest
    from tests.fake_llm import FakeLLM

    with FakeLLM(latency=0.0) as fake, _environ(fake.env()):
        samples = []
        for n in range(FLOOR_CALLS + 20):
            request = LLMRequest(
                system="You are a reviewer specialist.", prompt=f"Bench floor call {n}",
                model="fake", max_tokens=1024, deadline=time.monotonic() + 30, label="floor",
            )  # fmt: skip
            t0 = time.perf_counter()
            reply = providers.complete("openai", request)
            samples.append((time.perf_counter() - t0) * 1000)
            assert reply.text, reply
    return statistics.median(samples[20:])  # the first calls warm up


@contextlib.contextmanager
def _environ(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main() -> int:
    with redis_cleanup() as redis_db:
        os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", **LIMITS)
        os.environ.pop("TEST_DATABASE_NAME", None)
        workers: list[subprocess.Popen] = []
        with bench_database("bench_collab", needs_redis=True), contextlib.ExitStack() as cleanup:
            cleanup.callback(stop_workers, workers)  # before the database is dropped
            results = run(workers)
    left = redis_db.left
    print(f"redis {redis_db.url}: emptied, {left} keys left")
    overhead, queue, floor, parallel, parallel3, sequential, incomplete = results
    print(f"RESULT collaboration parallel_efficiency={parallel:.3f} (target >= {TARGET_PARALLEL})")
    print(
        f"RESULT collaboration parallel3_efficiency={parallel3:.3f} (target >= {TARGET_PARALLEL})"
    )
    print(
        f"RESULT collaboration sequential_efficiency={sequential:.3f} "
        f"(target >= {TARGET_SEQUENTIAL})"
    )
    print(f"RESULT collaboration burst_incomplete={incomplete} (target == 0)")
    print(
        f"RESULT collaboration overhead_ms_per_call={overhead:.1f} "
        f"(target <= {TARGET_OVERHEAD_MS:g})"
    )
    print(f"RESULT collaboration queue_to_start_ms={queue:.1f} (target <= {TARGET_QUEUE_MS:g})")
    ok = (
        parallel >= TARGET_PARALLEL
        and parallel3 >= TARGET_PARALLEL
        and sequential >= TARGET_SEQUENTIAL
        and incomplete == 0
        and overhead <= TARGET_OVERHEAD_MS
        and queue <= TARGET_QUEUE_MS
        and left == 0
    )
    return 0 if ok else 1


def run(workers: list) -> tuple:
    from config.celery import app
    from organization.caller import caller_for_member
    from tests.factories import make_admin_user, make_org
    from tests.fake_llm import FakeLLM

    app.conf.task_default_queue = QUEUE
    org = make_org("bench-collab")
    caller = caller_for_member(make_admin_user(org, username="bench"), org)
    floor = provider_floor()
    print(f"provider path alone (openai SDK → fake server, zero latency): p50 {floor:.1f} ms/call")
    with FakeLLM(latency=LATENCY) as fake:
        env = {**os.environ, **fake.env(), "LLM_PROVIDER": "openai", "LLM_MODEL": "fake"}
        os.environ.update(fake.env(), LLM_PROVIDER="openai", LLM_MODEL="fake")
        logdir = ROOT / "var"
        logdir.mkdir(exist_ok=True)
        workers += start_workers(env, logdir)
        # Warm-up (workers up, SDK imported, connections open); not measured.
        from collaboration.services import session_create

        warm = [session_create(caller=caller, payload={"task": "warm-up", "agents": agents(5),
                                                       "max_parallel": 5, "synthesis": "merge"})
                for _ in range(WORKERS * 2)]  # fmt: skip
        wait_finished([s.pk for s in warm], timeout=120)

        print(f"{WORKERS} worker processes; fake LLM latency {LATENCY:.1f} s per call")
        overhead, queue = overhead_and_queue(caller, fake)
        print(
            f"overhead per LLM call p50 {overhead:.1f} ms (floor: the provider path alone, "
            f"{floor:.1f} ms); queue to start p50 {queue:.1f} ms"
        )

        fake.latency = EFFICIENCY_LATENCY
        print(f"fake LLM latency {EFFICIENCY_LATENCY:.1f} s per call")
        parallel = run_one(
            caller, "5 agents parallel, max_parallel 5, merge",
            math.ceil(5 / 5) * EFFICIENCY_LATENCY + 0, agents=agents(5), max_parallel=5,
            synthesis="merge",
        )  # fmt: skip
        sequential = run_one(
            caller, "5 agents sequential, coordinator",
            5 * EFFICIENCY_LATENCY + EFFICIENCY_LATENCY, agents=agents(5), mode="sequential",
            synthesis="coordinator",
        )  # fmt: skip
        parallel3 = run_one(
            caller, "6 agents parallel, max_parallel 3, coord.",
            math.ceil(6 / 3) * EFFICIENCY_LATENCY + EFFICIENCY_LATENCY, agents=agents(6),
            max_parallel=3, synthesis="coordinator",
        )  # fmt: skip

        fake.reset()
        started = time.monotonic()
        burst = [session_create(caller=caller, payload={
            "task": f"burst {i}", "agents": agents(3), "synthesis": "coordinator"})
            for i in range(BURST)]  # fmt: skip
        done = wait_finished([s.pk for s in burst], timeout=180)
        elapsed = time.monotonic() - started
        incomplete = sum(s.status != "completed" for s in done) + BURST - len(done)
        print(
            f"burst: {BURST} sessions (3 agents + coordinator each) to {WORKERS} workers: "
            f"{BURST - incomplete} completed in {elapsed:.2f}s, "
            f"throughput {(BURST - incomplete) / elapsed:.2f} sessions/s, "
            f"{len(fake.calls)} LLM calls in total, peak {fake.peak_concurrency} in flight"
        )
    return overhead, queue, floor, parallel, parallel3, sequential, incomplete


if __name__ == "__main__":
    sys.exit(main())
