"""Benchmark: collaborative sessions on real Celery workers against a fake LLM with 1.0 s latency.

Issue 4 §5. Every LLM call takes a fixed 1.0 s on the fake provider server (tests/fake_llm.py,
OpenAI wire format, through the real `openai` SDK). Two `celery -A config worker` processes run
the sessions. For each session it prints the wall time (created → finished, as stored) next to the
ideal — parallel: ceil(N / max_parallel) x latency + synthesis latency; sequential:
N x latency + synthesis latency (a merge synthesis makes no LLM call) — and efficiency =
ideal / actual. Then 20 sessions are submitted at once and must all complete.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/collaboration.py
    make bench

It creates and drops a database of its own on the server of DATABASE_URL, and uses a Redis queue
of its own (nothing else on the broker is touched).
"""

import contextlib
import math
import os
import subprocess
import sys
import time
from pathlib import Path

# bench.common also takes bench/ off sys.path: this file is named collaboration.py, and with
# bench/ on sys.path `import collaboration` (the app) could import this script instead.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import ROOT, bench_database  # noqa: E402

LATENCY = 1.0
TARGET_PARALLEL = 0.85
TARGET_SEQUENTIAL = 0.9
BURST = 20
WORKERS = 2
QUEUE = f"bench-collab-{os.getpid()}"
# Limits for this run: the scenarios need 6 agents and max_parallel 5; reruns within the hour
# must not meet the per-organization start limit.
LIMITS = {"COLLAB_MAX_AGENTS": "6", "COLLAB_MAX_PARALLEL": "5", "COLLAB_AGENT_TIMEOUT": "30",
          "COLLAB_MAX_STARTS_PER_HOUR": "100000"}  # fmt: skip


def start_workers(env: dict, logdir: Path) -> list[subprocess.Popen]:
    workers = []
    for n in range(WORKERS):
        log = open(logdir / f"bench-collab-worker-{n}.log", "w")  # noqa: SIM115
        workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "-P",
                    "threads",
                    "-c",
                    "12",
                    "-Q",
                    QUEUE,
                    "-n",
                    f"bench{n}-{os.getpid()}@%h",
                    "-l",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        )
    return workers


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


def stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


def main() -> None:
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", **LIMITS)
    os.environ.pop("TEST_DATABASE_NAME", None)
    workers: list[subprocess.Popen] = []
    with bench_database("bench_collab", needs_redis=True), contextlib.ExitStack() as cleanup:
        cleanup.callback(stop, workers)  # before the database is dropped
        from config.celery import app
        from organization.caller import caller_for_member
        from tests.factories import make_admin_user, make_org
        from tests.fake_llm import FakeLLM

        app.conf.task_default_queue = QUEUE
        org = make_org("bench-collab")
        caller = caller_for_member(make_admin_user(org, username="bench"), org)
        with FakeLLM(latency=LATENCY) as fake:
            env = {**os.environ, **fake.env(), "LLM_PROVIDER": "openai", "LLM_MODEL": "fake"}
            os.environ.update(fake.env(), LLM_PROVIDER="openai", LLM_MODEL="fake")
            logdir = ROOT / "var"
            logdir.mkdir(exist_ok=True)
            workers += start_workers(env, logdir)
            # Warm-up (workers up, SDK imported, connections open); not measured.
            from collaboration.services import session_create

            warm = [session_create(caller=caller, payload={"task": "warm-up", "agents": agents(5), "max_parallel": 5,
                                                           "synthesis": "merge"})
                    for _ in range(WORKERS * 2)]  # fmt: skip
            wait_finished([s.pk for s in warm], timeout=120)

            print(f"fake LLM latency {LATENCY:.1f} s per call; {WORKERS} worker processes")
            parallel = run_one(
                caller, "5 agents parallel, max_parallel 5, merge",
                math.ceil(5 / 5) * LATENCY + 0, agents=agents(5), max_parallel=5,
                synthesis="merge",
            )  # fmt: skip
            sequential = run_one(
                caller, "5 agents sequential, coordinator", 5 * LATENCY + LATENCY,
                agents=agents(5), mode="sequential", synthesis="coordinator",
            )  # fmt: skip
            parallel3 = run_one(
                caller, "6 agents parallel, max_parallel 3, coord.",
                math.ceil(6 / 3) * LATENCY + LATENCY, agents=agents(6), max_parallel=3,
                synthesis="coordinator",
            )  # fmt: skip

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
        print(
            f"RESULT collaboration parallel_efficiency={parallel:.3f} (target >= {TARGET_PARALLEL})"
        )
        print(
            f"RESULT collaboration parallel3_efficiency={parallel3:.3f} (target >= {TARGET_PARALLEL})"
        )
        print(
            f"RESULT collaboration sequential_efficiency={sequential:.3f} (target >= {TARGET_SEQUENTIAL})"
        )
        print(f"RESULT collaboration burst_incomplete={incomplete} (target == 0)")
        ok = (
            parallel >= TARGET_PARALLEL
            and parallel3 >= TARGET_PARALLEL
            and sequential >= TARGET_SEQUENTIAL
            and incomplete == 0
        )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
