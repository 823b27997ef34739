"""What the bench scripts share: a throw-away PostgreSQL database, Django set-up, statistics,
and the organization of N agents that the roster and MCP benchmarks measure.

Each bench script starts with

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.common import ...  # noqa: E402

Importing this module leaves the project root, and not bench/, on sys.path: some scripts are
named like packages they import (bench/mcp.py imports the `mcp` SDK, bench/collaboration.py the
`collaboration` app), and with bench/ on sys.path they would import themselves instead.

Not a benchmark itself: `make bench` runs every bench/*.py, so run as a script it says so and
exits 0.
"""

import contextlib
import json
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# Settings refuse to start without a SECRET_KEY (DEBUG off); a benchmark's throwaway database
# needs no real one. Set here, before Django, so the servers and workers it starts inherit it.
os.environ.setdefault("SECRET_KEY", "bench-only-insecure-key-never-use-in-production")
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXPERTISE = ["PostgreSQL", "React", "AWS", "Docker", "Figma", "Redis", "Terraform", "CSS",
             "TypeScript", "Kubernetes", "Node.js", "MySQL", "API Design", "Planning"]  # fmt: skip


def _script() -> str:
    return f"bench/{Path(sys.argv[0]).name}"


def server_url_and_bench_db(prefix: str, *, needs_redis: bool = False) -> tuple[str, str]:
    """(URL of the server's `postgres` database, URL of a new database `<prefix>_<pid>`)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit(f"{_script()} runs on PostgreSQL: set DATABASE_URL=postgres://…")
    if needs_redis and not os.environ.get("REDIS_URL"):
        sys.exit(f"{_script()} needs Redis: set REDIS_URL=redis://…")
    parts = urlsplit(url)
    name = f"{prefix}_{os.getpid()}"
    return urlunsplit(parts._replace(path="/postgres")), urlunsplit(parts._replace(path=f"/{name}"))


def admin_sql(server_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def bench_database(
    prefix: str, *, needs_redis: bool = False, template: str | None = None
) -> Iterator[str]:
    """A database of its own on the server of DATABASE_URL, migrated (or a copy of `template`, a
    migrated database of the same server), with Django set up on it.

    Yields its URL (also put in os.environ["DATABASE_URL"] for subprocesses). On the way out it
    closes this process's connections and drops the database, whatever happened; nothing of the
    server's other databases is touched.
    """
    if "django.apps" in sys.modules and sys.modules["django.apps"].apps.ready:
        # Django would go on using the database it was set up with: DATABASE_URL's own, which
        # the benchmark would fill with its organization and leave migrated.
        sys.exit("bench_database: Django is already set up; call it before django.setup().")
    server_url, bench_url = server_url_and_bench_db(prefix, needs_redis=needs_redis)
    bench_db = urlsplit(bench_url).path.lstrip("/")
    copy = f' TEMPLATE "{template}"' if template else ""
    admin_sql(server_url, f'CREATE DATABASE "{bench_db}"{copy}')
    try:
        os.environ["DATABASE_URL"] = bench_url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        if not template:
            from django.core.management import call_command

            call_command("migrate", verbosity=0)
        yield bench_url
    finally:
        if "django.db" in sys.modules:
            from django.db import connections

            connections.close_all()
        admin_sql(server_url, f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def analyze() -> None:
    """Fresh planner statistics, as autovacuum would have them for a live organization."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def build_org(size: int, *, slug: str, name: str, roles: bool = False):
    """An organization of `size` agents in 20 teams, with seniors and held tasks (and, with
    `roles`, an AgentRole each). Returns (organization, agent key, task count)."""
    from organization.models import Agent, AgentRole, Organization, Team
    from organization.services import api_key_create
    from tasks.models import Task, TaskStatus

    rng = random.Random(size)
    org = Organization.objects.create(slug=slug, name=name)
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
    if roles:
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
    analyze()
    return org, key, len(tasks)


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def quiet(org) -> bool:
    """Every task finished and every run over (nothing queued, running or waiting)."""
    from runtime.models import ACTIVE_STATUSES, Run, RunTrigger
    from tasks.models import FINISHED_STATUSES, Task

    return not (
        Task.objects.filter(organization=org).exclude(status__in=FINISHED_STATUSES).exists()
        or Run.objects.filter(organization=org, status__in=ACTIVE_STATUSES).exists()
        or RunTrigger.objects.filter(organization=org, run__isnull=True).exists()
    )


def audit_trail_damage(org) -> dict[str, int]:
    """The organization's task events replayed: events written twice (same task, kind, actor,
    before and after), and tasks whose events do not chain from `created` to the task as it is."""
    from tasks.events import snapshot
    from tasks.models import Task, TaskEvent

    events = defaultdict(list)
    for e in TaskEvent.objects.filter(organization=org).order_by("created_at", "pk"):
        events[e.task_id].append(e)
    keys = Counter(
        (
            e.task_id,
            e.kind,
            e.actor_label,
            json.dumps(e.before, sort_keys=True),
            json.dumps(e.after, sort_keys=True),
        )
        for chain in events.values()
        for e in chain
    )
    broken = 0
    for task in Task.objects.filter(organization=org).select_related("assignee", "queued_for"):
        chain = events.get(task.pk, [])
        ok = bool(chain) and chain[0].kind == "created" and chain[-1].after == snapshot(task)
        ok = ok and all(b.before == a.after for a, b in zip(chain, chain[1:], strict=False))
        broken += not ok
    return {
        "events_written_twice": sum(n - 1 for n in keys.values() if n > 1),
        "audit_replay_broken": broken,
    }


@dataclass
class RedisDb:
    """The bench's own Redis database (`redis_cleanup`)."""

    url: str
    left: int | None = None  # keys left once it was emptied (0), known on the way out


@contextlib.contextmanager
def redis_cleanup() -> Iterator[RedisDb]:
    """A Redis database of the bench's own for its whole run, emptied on the way out: REDIS_URL
    and CELERY_BROKER_URL point at it for this process's Django and every server and worker it
    starts (so it must be entered before `bench_database`, which sets Django up). A benchmark so
    leaves nothing behind (throttle counters, kombu's bindings and queues) and never touches
    another program's keys — deleting whatever appeared in a shared database meanwhile took a
    test run's broker keys too."""
    if not os.environ.get("REDIS_URL"):
        sys.exit(f"{_script()} needs Redis: set REDIS_URL=redis://…")
    saved = {name: os.environ.get(name) for name in ("REDIS_URL", "CELERY_BROKER_URL")}
    url, client = claim_redis_db(saved["REDIS_URL"], owner=f"bench-{Path(sys.argv[0]).stem}")
    os.environ.update(REDIS_URL=url, CELERY_BROKER_URL=url)
    db = RedisDb(url)
    try:
        yield db
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        db.left = release_redis_db(client)


def claim_redis_db(url: str, *, owner: str):
    """The highest-numbered empty database of the server of `url`, marked as ours (SET NX of
    `<owner>-owner` on an empty database, so two benches never share one). Returns (its URL, a
    client on it). Its workers, broker and cache point at it; `release_redis_db` empties it."""
    import redis

    mark = f"{owner}-owner"
    parts = urlsplit(url)
    probe = redis.Redis.from_url(urlunsplit(parts._replace(path="/0")))
    databases = int(probe.config_get("databases").get("databases", 16))
    probe.close()
    for db in range(databases - 1, 0, -1):
        client = redis.Redis.from_url(urlunsplit(parts._replace(path=f"/{db}")))
        if client.dbsize() == 0 and client.set(mark, os.getpid(), nx=True):
            if client.dbsize() == 1:
                return urlunsplit(parts._replace(path=f"/{db}")), client
            client.delete(mark)  # someone else started on it at the same moment
        client.close()
    sys.exit(f"{_script()}: no empty Redis database to use on the server of REDIS_URL")


def release_redis_db(client) -> int:
    """Empty our database (the queue, kombu's bindings and unacked sets, the cache, our mark);
    returns how many keys are left (0)."""
    client.flushdb()
    left = client.dbsize()
    client.close()
    return left


def start_celery_workers(
    env: dict, logdir: Path, *, name: str, count: int, concurrency: int, queue: str | None = None
) -> list:
    """`count` real Celery worker processes (threads pool), each logging to var/<name>-<n>.log."""
    import subprocess

    workers = []
    for n in range(count):
        log = open(logdir / f"bench-{name}-worker-{n}.log", "w")  # noqa: SIM115
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "-P", "threads",
                   "-c", str(concurrency), "-n", f"bench-{name}{n}-{os.getpid()}@%h",
                   "-l", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
        if queue:
            command += ["-Q", queue]
        workers.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        )
    return workers


def stop_workers(workers: list) -> None:
    """SIGTERM each worker, then SIGKILL one that has not stopped within 20 s."""
    import subprocess

    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


if __name__ == "__main__":
    print("bench/common.py: shared helpers of the bench scripts; nothing to measure")
