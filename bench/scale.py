"""Benchmark: many managed agents thinking at once on one box (issue 36).

Each scenario runs in a process of its own on a fresh database (a copy of one migrated template)
and a Redis database of its own, against the service started as documented (docs/operations.md):
`python -m config.serve`, `celery -A config worker -l info` — no pool or concurrency option: the
settings choose them — and `celery -A config beat -l info`; the embedded scenario starts
`python -m config.embedded` as `make run` does, on a temporary VAR_DIR. The model is the fake
provider of tests/fake_llm.py in a process of its own (OpenAI wire format, a fixed latency).

- `runtime-256`, `runtime-1000`: N managed agents, one task each, created through
  `POST /api/tasks` with organization keys; each run makes two model turns — `get_task` on its
  task, then the answer that completes it. Efficiency = 2 × latency ÷ wall (the first POST →
  the last run finished). The 1,000 run also gives the peak of the database's connections.
- `plain-64`, `kill-64`: 64 agents at 2 s whose first turn moves the task to in_progress and
  completes it (writes, so a call done twice shows in the audit trail); in `kill-64` the worker's
  process group is SIGKILLed once half the first turns were answered, with calls in flight, and
  started again. Nothing may be lost or done twice (`lost_or_duplicated`).
- `collaboration`: 10 sessions of 5 parallel specialists and a coordinator synthesis at 2 s,
  started at once through `POST /api/collaborations`; ideal 4 s.
- `embedded-64`: 64 agents at 2 s on `make run`'s SQLite and filesystem broker; its logs must not
  say "database is locked".

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/scale.py [--only NAME[,NAME]] [--agents N] [--latency S] [--timeout S]

`--agents`/`--latency` change the scenarios' size and latency (no RESULT lines then);
`--timeout` the seconds a scenario may take before it is cut (its efficiency then reads as at
most ideal ÷ timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (  # noqa: E402
    ROOT,
    admin_sql,
    audit_trail_damage,
    bench_database,
    quiet,
    redis_cleanup,
    server_url_and_bench_db,
    wait_until,
)
from bench.load import cpu_of, free_port, server, tree_of  # noqa: E402

# The documented production command, with no pool or concurrency option: the settings choose.
WORKER = [sys.executable, "-m", *"celery -A config worker -l info".split()]
WORKER += ["-n", f"bench-scale-{os.getpid()}@%h"]
BEAT = [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "info"]
# The driver's own connections (polling, building the organization) are not the service's.
DRIVER_APP = "bench-scale-driver"
SAMPLE_SECONDS = 0.2
POST_CONNECTIONS = 16
TASKS_PER_KEY = 500  # each organization key stays under API_THROTTLE_RATE's 600 a minute
WARM_AGENTS = 4
LOG_DIR = ROOT / "var"


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # runtime | collaboration | embedded
    size: int  # agents, or sessions
    latency: float
    deadline: float  # seconds after the first POST before the scenario is cut
    writes: bool = False  # turn 1 moves and completes the task instead of reading it
    kill: bool = False

    @property
    def ideal(self) -> float:
        return 2 * self.latency


SCENARIOS = {s.name: s for s in [
    Scenario("runtime-256", "runtime", 256, 5.0, deadline=180),
    Scenario("runtime-1000", "runtime", 1000, 10.0, deadline=300),
    Scenario("plain-64", "runtime", 64, 2.0, deadline=900, writes=True),
    Scenario("kill-64", "runtime", 64, 2.0, deadline=900, writes=True, kill=True),
    Scenario("collaboration", "collaboration", 10, 2.0, deadline=180),
    Scenario("embedded-64", "embedded", 64, 2.0, deadline=240),
]}  # fmt: skip
SPECIALISTS = 5


# --- the fake model, in a process of its own ------------------------------------------------------

TASK_REF = re.compile(r"\(task #(\d+)\)")


def serve_model(conn) -> None:
    """The fake provider's process: answers the driver's (command, argument) on `conn`."""
    from tests.fake_llm import FakeLLM, Reply, ToolUse, default_text

    writes = [False]

    def tool_calls(call) -> list:
        if call.purpose != "run" or call.tool_results:
            return []
        found = TASK_REF.search(call.prompt)
        if found is None:
            return [ToolUse("get_my_tasks", {})]
        task = int(found.group(1))
        if writes[0]:
            return [
                ToolUse("update_task_status", {"task_id": task, "status": "in_progress"}),
                ToolUse("complete_task", {"task_id": task, "result": "Done by the bench."}),
            ]
        return [ToolUse("get_task", {"task_id": task})]

    def text(call) -> str:
        if call.purpose != "run":
            return default_text(call)
        return "Done: the task is answered." if call.tool_results else ""

    fake = FakeLLM(default=Reply(text=text, tool_calls=tool_calls)).start()
    conn.send(fake.env())
    while True:
        command, argument = conn.recv()
        if command == "latency":
            fake.latency = argument
        elif command == "writes":
            writes[0] = argument
        elif command == "reset":
            fake.reset()
        elif command == "stop":
            fake.stop()
            conn.send(None)
            return
        conn.send(_model_stats(fake) if command == "stats" else None)


def _model_stats(fake) -> dict:
    with fake.lock:
        calls, in_flight, peak = list(fake.calls), fake.inflight, fake.peak_concurrency
    runs = [c for c in calls if c.purpose == "run"]
    return {
        "calls": len(calls),
        "answered": sum(c.answered for c in calls),
        "given_up": sum(c.ended is not None and not c.answered for c in calls),
        "in_flight": in_flight,
        "peak": peak,
        "first_turns_answered": sum(c.answered and not c.tool_results for c in runs),
        "run_answered": Counter(c.agent for c in runs if c.answered),
    }


class Model:
    """The driver's end of the fake provider's process."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve_model, args=(child,), daemon=True)
        self.process.start()
        self.env = self.conn.recv()
        self.lock = threading.Lock()

    def ask(self, command: str, argument=None):
        with self.lock:
            self.conn.send((command, argument))
            return self.conn.recv()

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.ask("stop")
        self.process.join(5)


# --- the service ----------------------------------------------------------------------------------


class Service:
    """One worker and the beat as documented, each in its own process group, logging to
    var/bench-scale-<scenario>-<process>.log (the server is `bench.load.server`)."""

    def __init__(self, env: dict, scenario: str):
        self.env = env
        self.logs = {n: LOG_DIR / f"bench-scale-{scenario}-{n}.log" for n in ("worker", "beat")}
        for log in self.logs.values():
            log.write_bytes(b"")
        self.worker = self._start("worker", WORKER)
        pidfile = LOG_DIR / f"bench-scale-beat-{os.getpid()}.pid"
        self.beat = self._start("beat", [*BEAT, "--pidfile", str(pidfile)])

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.logs[name], "ab") as log:
            return subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill_worker(self) -> None:
        """SIGKILL the worker and every process it started; then start it again."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait()
        time.sleep(1)
        self.worker = self._start("worker", WORKER)

    def sampler(self, web, model: Model) -> Sampler:
        """A started Sampler of the bench database and of these processes, the server's (a
        `bench.load.Server`) and the model's."""
        roles = {
            "worker": lambda: tree_of(self.worker.pid),
            "server": web.pids,
            "beat": lambda: tree_of(self.beat.pid),
            "model": lambda: [model.process.pid],
        }
        sampler = Sampler(roles, os.environ["DATABASE_URL"])
        sampler.start()
        return sampler

    def stop(self) -> None:
        for process in (self.worker, self.beat):
            stop_group(process)


def stop_group(process: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM a process group, SIGKILL it after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def service_env(model: Model, **extra: str) -> dict:
    """The driver's environment for the service's processes, pointed at the fake model. Without
    DJANGO_SETTINGS_MODULE (each process takes its default; the server, bench/bench_settings.py)
    and with an empty PGAPPNAME: the driver's connections are told from the service's by it."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return {
        **env,
        **model.env,
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "fake",
        "PGAPPNAME": "",
        **extra,
    }


def resent_by_sweep(log: Path, offset: int) -> int:
    """Runs the sweep sent again, from the worker's log after `offset` (its INFO line)."""
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    sent = 0
    for line in re.findall(r"runtime sweep sent again: (.*)", text):
        sent += sum(len(re.findall(r"\d+", ids)) for ids in re.findall(r"\[([\d, ]*)\]", line))
    return sent


# --- sampling -------------------------------------------------------------------------------------


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


class Sampler(threading.Thread):
    """Every SAMPLE_SECONDS: the bench database's connections (pg_stat_activity, the driver's
    left out), the worker's RSS (its process and children, summed), each process's CPU."""

    def __init__(self, roles: dict, database_url: str | None):
        super().__init__(daemon=True)
        self.roles, self.database_url = roles, database_url
        self.first: dict[str, dict[int, float]] = defaultdict(dict)
        self.last: dict[str, dict[int, float]] = defaultdict(dict)
        self.connections_peak, self.connections_at_peak = 0, {}
        self.rss_peak_mb, self.rss_processes = 0.0, 0
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        conn = None
        if self.database_url:
            import psycopg

            conn = psycopg.connect(self.database_url, autocommit=True, application_name=DRIVER_APP)
        try:
            while not self.done.is_set():
                self.sample(conn)
                self.done.wait(SAMPLE_SECONDS)
            self.sample(conn)
        finally:
            if conn is not None:
                conn.close()

    def sample(self, conn) -> None:
        if conn is not None:
            rows = conn.execute(
                "SELECT pid, coalesce(state, '?') FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name <> %s",
                [DRIVER_APP],
            ).fetchall()
            if len(rows) > self.connections_peak:
                self.connections_peak = len(rows)
                self.connections_at_peak = dict(Counter(state for _, state in rows))
            self._cpu("postgres", [pid for pid, _ in rows])
        for role, pids_of in self.roles.items():
            pids = pids_of()
            self._cpu(role, pids)
            if role == "worker":
                rss = rss_mb(pids)
                if rss > self.rss_peak_mb:
                    self.rss_peak_mb, self.rss_processes = rss, len(pids)
        self.samples += 1

    def _cpu(self, role: str, pids: list[int]) -> None:
        for pid, cpu in cpu_of(pids).items():
            if cpu:
                # A process born after the first sample counts all its CPU.
                self.first[role].setdefault(pid, cpu if self.samples == 0 else 0.0)
                self.last[role][pid] = cpu

    def cpu(self, role: str) -> float:
        return sum(cpu - self.first[role][pid] for pid, cpu in self.last[role].items())

    def stop(self) -> None:
        self.done.set()
        self.join()


# --- the organization and its work ----------------------------------------------------------------


def build_org(slug: str, size: int):
    """An organization of `size` managed agents on the openai provider; returns (org, handles,
    organization keys)."""
    from organization.models import Agent, AgentRuntime, Organization, Team, TeamRule
    from organization.services import api_key_create

    org = Organization.objects.create(slug=slug, name=slug.title())
    TeamRule.objects.create(organization=org)
    team = Team.objects.create(organization=org, name="Scale")
    handles = [f"{slug}-{n:04d}" for n in range(size)]
    Agent.objects.bulk_create(
        [
            Agent(
                organization=org,
                handle=h,
                name=h.title(),
                role="Engineer",
                team=team,
                runtime=AgentRuntime.MANAGED,
                llm_provider="openai",
                llm_model="fake",
            )
            for h in handles
        ],
        batch_size=1000,
    )
    keys = [
        api_key_create(organization=org, agent=None, name=f"bench {k}")[1]
        for k in range(max(1, math.ceil(size / TASKS_PER_KEY)))
    ]
    return org, handles, keys


def post_all(url: str, posts: list[tuple[str, dict, str]]) -> tuple[float, Counter, list[dict]]:
    """POST each (path, body, key) over POST_CONNECTIONS connections at once: (seconds, status
    counts, answers)."""
    import httpx

    async def main():
        limits = httpx.Limits(max_connections=POST_CONNECTIONS)
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
            gate = asyncio.Semaphore(POST_CONNECTIONS)

            async def one(path, body, key):
                async with gate:
                    r = await client.post(
                        path, json=body, headers={"Authorization": f"Bearer {key}"}
                    )
                    return r.status_code, r.json() if r.content else {}

            return await asyncio.gather(*(one(*p) for p in posts))

    started = time.monotonic()
    answers = asyncio.run(main())
    seconds = time.monotonic() - started
    statuses = Counter(status for status, _ in answers)
    for status, body in answers:
        if status >= 300:
            print(f"  a POST answered {status}: {json.dumps(body)[:300]}")
            break
    return seconds, statuses, [body for _, body in answers]


def task_posts(handles: list[str], keys: list[str]) -> list[tuple[str, dict, str]]:
    return [
        ("/api/tasks", {"title": f"Scale task for {h}", "agent_id": h}, keys[n % len(keys)])
        for n, h in enumerate(handles)
    ]


def warm_up(url: str, model: Model) -> None:
    """A few runs at zero latency, so that the worker has imported and connected what it needs
    before the measured run (not measured)."""
    org, handles, keys = build_org("warm", WARM_AGENTS)
    model.ask("latency", 0.0)
    post_all(url, task_posts(handles, keys))
    if not wait_until(lambda: quiet(org), timeout=240, interval=0.25):
        sys.exit("bench/scale.py: the warm-up runs did not finish; see var/bench-scale-*.log")


# --- the audit ------------------------------------------------------------------------------------

# Damage that a run cut at its deadline shows without anything being lost.
UNFINISHED = {
    "tasks_not_completed",
    "runs_unfinished",
    "agents_never_run",
    "triggers_waiting",
    "usage_rows_missing",
    "usage_reserved_left",
}


def runtime_audit(org, handles: list[str], stats: dict, *, killed: bool) -> tuple[dict, dict]:
    """(damage, information): runs, tool calls and ledger rows against what each agent's one
    task asked for and the model calls the fake model answered."""
    from django.db.models import Count, Prefetch, Q

    from costs.models import UsageRecord, UsageState
    from runtime.models import Run, RunTrigger, RunTurn
    from tasks.models import Task

    runs = list(
        Run.objects.filter(organization=org)
        .select_related("agent")
        .prefetch_related(Prefetch("turn_rows", RunTurn.objects.order_by("index")))
    )
    calls_twice = 0
    for run in runs:
        calls = Counter(
            (t["name"], json.dumps(t.get("arguments"), sort_keys=True))
            for t in run.turns
            if t["kind"] == "tool_call" and t.get("status") in ("ok", "error")
        )
        calls_twice += sum(n - 1 for n in calls.values())
    # Each call the model answered is booked once; one whose answer its killed worker never
    # read is not booked (its reservation expires), and is asked again on resume.
    usage = {
        row["agent__handle"]: row
        for row in UsageRecord.objects.filter(organization=org, run__isnull=False)
        .order_by()
        .values("agent__handle")
        .annotate(
            recorded=Count("pk", filter=Q(state=UsageState.RECORDED)),
            reserved=Count("pk", filter=Q(state=UsageState.RESERVED)),
        )
    }
    answered = stats["run_answered"]
    recorded = {h: usage.get(h, {}).get("recorded", 0) for h in handles}
    per_agent = Counter(run.agent.handle for run in runs)
    resumed = sum(run.attempts > 1 for run in runs)
    extra_calls = sum(max(0, answered[h] - 2) for h in handles)
    unbooked = sum(max(0, answered[h] - recorded[h]) for h in handles)
    reserved = sum(row["reserved"] for row in usage.values())
    damage = {
        "tasks_not_completed": Task.objects.filter(organization=org)
        .exclude(status="completed")
        .count(),
        "runs_unfinished": sum(run.status != "completed" for run in runs),
        "agents_never_run": sum(h not in per_agent for h in handles),
        "runs_beyond_one_per_agent": sum(n - 1 for n in per_agent.values()),
        "triggers_waiting": RunTrigger.objects.filter(organization=org, run__isnull=True).count(),
        "tool_calls_recorded_twice": calls_twice,
        "usage_booked_twice": sum(max(0, recorded[h] - answered[h]) for h in handles),
        **audit_trail_damage(org),
    }
    information = {
        "runs": len(runs),
        "runs_resumed": resumed,
        "model_calls_beyond_two_per_agent": extra_calls,
        "answered_calls_not_booked": unbooked,
        "usage_reserved_left": reserved,
    }
    if not killed:
        # Without a kill nothing is asked twice: no run resumed, every answer booked and settled.
        damage |= {
            "runs_started_twice": resumed,
            "model_calls_beyond_two": extra_calls,
            "usage_rows_missing": unbooked,
            "usage_reserved_left": reserved,
        }
    return damage, information


# --- scenarios ------------------------------------------------------------------------------------


@dataclass
class Measured:
    wall: float
    finished: bool
    posted: float
    statuses: Counter
    driver_cpu: float


def measure(scenario: Scenario, url: str, posts: list, done, last_finished, kill=None) -> Measured:
    """Send the POSTs at once, then wait for `done()` up to the scenario's deadline; the wall
    runs from the first POST to `last_finished()` (or to the deadline)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    started = time.time()
    posted, statuses, _ = post_all(url, posts)
    if kill is not None:
        kill()
    left = scenario.deadline - (time.time() - started)
    finished = wait_until(done, timeout=max(left, 0), interval=0.25)
    end = last_finished() if finished else time.time()
    after = resource.getrusage(resource.RUSAGE_SELF)
    driver = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    return Measured(end - started, finished, posted, statuses, driver)


def report_common(
    scenario: Scenario, m: Measured, stats: dict, sampler: Sampler, resent: int, possible: int
) -> dict:
    efficiency = scenario.ideal / m.wall
    cut = "" if m.finished else f" (cut at the deadline, {scenario.deadline:g} s: at most)"
    print(
        f"  created in {m.posted:.2f} s ({dict(m.statuses)}); wall {m.wall:.2f} s, ideal "
        f"{scenario.ideal:g} s: efficiency {efficiency:.3f}{cut}"
    )
    print(
        f"  model: {stats['calls']} calls, {stats['answered']} answered, {stats['given_up']} "
        f"given up by the client; peak {stats['peak']} in flight (of {possible})"
    )
    roles = ("worker", "postgres", "server", "beat", "model")
    measured = [*sampler.roles, *(["postgres"] if sampler.database_url else [])]
    cpu = {role: sampler.cpu(role) for role in roles if role in measured}
    print(
        "  CPU seconds: "
        + ", ".join(f"{role} {s:.1f}" for role, s in cpu.items())
        + f", this driver {m.driver_cpu:.1f}"
    )
    if sampler.database_url:
        print(
            f"  database connections: peak {sampler.connections_peak} {sampler.connections_at_peak}"
        )
    print(
        f"  worker RSS: peak {sampler.rss_peak_mb:.0f} MB ({sampler.rss_processes} processes); "
        f"runs the sweep sent again: {resent}"
    )
    return {
        "efficiency": efficiency,
        "finished": m.finished,
        "wall": m.wall,
        "cpu": cpu,
        "peak_in_flight": stats["peak"],
        "connections_peak": sampler.connections_peak,
        "rss_mb": sampler.rss_peak_mb,
        "resent": resent,
    }


def runtime_figures(scenario: Scenario, org, handles, stats, m: Measured, *, killed) -> dict:
    damage, information = runtime_audit(org, handles, stats, killed=killed)
    if not m.finished:
        damage = {k: v for k, v in damage.items() if k not in UNFINISHED}
    print("  audit: " + ", ".join(f"{k}={v}" for k, v in damage.items()))
    print("  also: " + ", ".join(f"{k}={v}" for k, v in information.items()))
    return {"damage": sum(damage.values()), "damage_detail": damage}


def kill_mid_call(service: Service, model: Model, size: int) -> dict:
    """SIGKILL the worker once half the first turns were answered and calls are in flight."""
    found = {}

    def ready() -> bool:
        found.update(model.ask("stats"))
        return found["first_turns_answered"] >= size // 2 and found["in_flight"] > 0

    wait_until(ready, timeout=600, interval=0.05)
    service.kill_worker()
    print(
        f"  worker SIGKILLed with {found['in_flight']} model calls in flight, "
        f"{found['first_turns_answered']} first turns answered; started again"
    )
    return found


def last_run_finished(org) -> float:
    from django.db.models import Max

    from runtime.models import Run

    last = Run.objects.filter(organization=org).aggregate(Max("finished_at"))["finished_at__max"]
    return last.timestamp() if last else time.time()


def runtime_scenario(scenario: Scenario, model: Model, env: dict) -> dict:
    with server("serve", workers=None, env=env) as web, contextlib.ExitStack() as stack:
        service = Service(env, scenario.name)
        stack.callback(service.stop)
        model.ask("writes", scenario.writes)
        warm_up(web.url, model)
        org, handles, keys = build_org("scale", scenario.size)
        model.ask("reset")
        model.ask("latency", scenario.latency)
        first = "update_task_status + complete_task" if scenario.writes else "get_task"
        print(
            f"{scenario.name}: {scenario.size} managed agents, a task each by POST /api/tasks "
            f"({POST_CONNECTIONS} connections, {len(keys)} organization keys); 2 model turns "
            f"({first}, then the answer); fake latency {scenario.latency:g} s"
        )
        sampler = service.sampler(web, model)
        offset = service.logs["worker"].stat().st_size
        kill = (lambda: kill_mid_call(service, model, scenario.size)) if scenario.kill else None
        m = measure(
            scenario,
            web.url,
            task_posts(handles, keys),
            lambda: quiet(org),
            lambda: last_run_finished(org),
            kill,
        )
        sampler.stop()
        stats = model.ask("stats")
        resent = resent_by_sweep(service.logs["worker"], offset)
        report = report_common(scenario, m, stats, sampler, resent, scenario.size)
        return report | runtime_figures(scenario, org, handles, stats, m, killed=scenario.kill)


def collaboration_scenario(scenario: Scenario, model: Model, env: dict) -> dict:
    from collaboration.models import CollaborationSession

    with server("serve", workers=None, env=env) as web, contextlib.ExitStack() as stack:
        service = Service(env, scenario.name)
        stack.callback(service.stop)
        org, _, keys = build_org("collab", 0)
        payload = {
            "agents": [
                {"name": f"specialist-{i}", "role": "reviewer", "focus": f"part {i}"}
                for i in range(SPECIALISTS)
            ],
            "max_parallel": SPECIALISTS,
            "synthesis": "coordinator",
        }
        model.ask("latency", 0.0)
        post_all(web.url, [("/api/collaborations", {"task": "warm-up", **payload}, keys[0])])
        wait_until(lambda: all(s.is_finished for s in CollaborationSession.objects.all()), 240)
        warm = set(CollaborationSession.objects.values_list("pk", flat=True))
        model.ask("reset")
        model.ask("latency", scenario.latency)
        print(
            f"collaboration: {scenario.size} sessions of {SPECIALISTS} parallel specialists and "
            f"a coordinator synthesis, started at once by POST /api/collaborations; fake "
            f"latency {scenario.latency:g} s"
        )
        sampler = service.sampler(web, model)

        def sessions() -> list:
            return list(CollaborationSession.objects.exclude(pk__in=warm))

        posts = [
            ("/api/collaborations", {"task": f"Scale session {n}", **payload}, keys[0])
            for n in range(scenario.size)
        ]
        m = measure(
            scenario,
            web.url,
            posts,
            lambda: all(s.is_finished for s in sessions()) and len(sessions()) == scenario.size,
            lambda: max(s.finished_at.timestamp() for s in sessions()),
        )
        sampler.stop()
        stats = model.ask("stats")
        report = report_common(scenario, m, stats, sampler, 0, scenario.size * SPECIALISTS)
        statuses = Counter(s.status for s in sessions())
        print(f"  sessions: {dict(statuses)}")
        if statuses["completed"] != scenario.size:
            report["efficiency"] = 0.0  # a session that did not complete is not done sooner
        return report | {"damage": scenario.size - statuses["completed"]}


def embedded_scenario(scenario: Scenario, model: Model) -> dict:
    """`make run`'s service (python -m config.embedded) on a temporary VAR_DIR."""
    var = Path(tempfile.mkdtemp(prefix="bench-scale-embedded-"))
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    os.environ.update(VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="config.settings")
    port = free_port()
    env = {**service_env(model), "PORT": str(port)}
    log = LOG_DIR / f"bench-scale-{scenario.name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "config.embedded"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        state = var / "run.json"
        if not wait_until(lambda: _answers(url) and state.exists(), timeout=600, interval=0.5):
            sys.exit(f"bench/scale.py: `make run`'s service did not start; see {log}")
        import django

        django.setup()
        children = json.loads(state.read_text())["children"]
        model.ask("writes", scenario.writes)
        warm_up(url, model)
        org, handles, keys = build_org("scale", scenario.size)
        model.ask("reset")
        model.ask("latency", scenario.latency)
        print(
            f"{scenario.name}: `make run`'s service (SQLite, filesystem broker) on {var}; "
            f"{scenario.size} managed agents, a task each by POST /api/tasks; 2 model turns "
            f"(get_task, then the answer); fake latency {scenario.latency:g} s"
        )
        roles = {name: (lambda pid=pid: tree_of(pid)) for name, pid in children.items()}
        roles["model"] = lambda: [model.process.pid]
        sampler = Sampler(roles, None)
        sampler.start()
        worker_log = var / "log" / "worker.log"
        offset = worker_log.stat().st_size
        m = measure(
            scenario,
            url,
            task_posts(handles, keys),
            lambda: quiet(org),
            lambda: last_run_finished(org),
        )
        sampler.stop()
        stats = model.ask("stats")
        resent = resent_by_sweep(worker_log, offset)
        report = report_common(scenario, m, stats, sampler, resent, scenario.size)
        report |= runtime_figures(scenario, org, handles, stats, m, killed=False)
    finally:
        from django.db import connections

        connections.close_all()
        stop_group(process, grace=60)
        locked = 0
        for path in [log, *sorted((var / "log").glob("*.log"))]:
            text = path.read_text(errors="replace")
            locked += text.count("database is locked")
            if path != log:
                shutil.copy(path, LOG_DIR / f"bench-scale-{scenario.name}-{path.name}")
        shutil.rmtree(var, ignore_errors=True)
    print(f'  "database is locked" in its logs: {locked}')
    return report | {"locked": locked}


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def run_scenario(scenario: Scenario, template: str | None) -> dict:
    """One scenario in this process: its database, Redis, model and service; its figures."""
    LOG_DIR.mkdir(exist_ok=True)
    os.environ["PGAPPNAME"] = DRIVER_APP
    model = Model()
    try:
        if scenario.kind == "embedded":
            return embedded_scenario(scenario, model)
        with redis_cleanup(), bench_database("bench_scale", needs_redis=True, template=template):
            extra = {"COLLAB_MAX_PARALLEL": str(SPECIALISTS)}
            env = service_env(model, **(extra if scenario.kind == "collaboration" else {}))
            if scenario.kind == "collaboration":
                return collaboration_scenario(scenario, model, env)
            return runtime_scenario(scenario, model, env)
    finally:
        model.close()


# --- the driver -----------------------------------------------------------------------------------


def make_template() -> tuple[str, str]:
    """A migrated database that each scenario's database copies: (server URL, its name)."""
    server_url, url = server_url_and_bench_db("bench_scale_template")
    name = url.rsplit("/", 1)[1]
    admin_sql(server_url, f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    migrate = [sys.executable, "manage.py", "migrate", "-v", "0"]
    if subprocess.run(migrate, cwd=ROOT, env=env).returncode != 0:
        admin_sql(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        sys.exit("bench/scale.py: migrating the template database failed")
    return server_url, name


TARGETS = [
    # (metric, scenario, figure, op, target)
    ("runtime_efficiency_256", "runtime-256", "efficiency", ">=", 0.8),
    ("runtime_efficiency_1000", "runtime-1000", "efficiency", ">=", 0.6),
    ("db_connections_peak", "runtime-1000", "connections_peak", "<=", 30),
    ("collaboration_efficiency", "collaboration", "efficiency", ">=", 0.8),
    ("embedded_efficiency_64", "embedded-64", "efficiency", ">=", 0.7),
    ("embedded_database_locked", "embedded-64", "locked", "==", 0),
]


def results(reports: dict[str, dict | None]) -> list[tuple[str, float, str, float]]:
    lines = []
    for metric, name, figure, op, target in TARGETS:
        if name in reports:
            report = reports[name]
            lines.append((metric, report[figure] if report else math.nan, op, target))
    runtime = [n for n in ("runtime-256", "runtime-1000", "plain-64", "kill-64") if n in reports]
    if runtime:
        rss = [reports[n]["rss_mb"] if reports[n] else math.nan for n in runtime]
        lines.append(("worker_rss_mb", max(rss), "<=", 1024))
    if "plain-64" in reports and "kill-64" in reports:
        damage = [
            r["damage"] if r else math.nan
            for n, r in reports.items()
            if SCENARIOS[n].kind != "collaboration"
        ]
        lines.append(("lost_or_duplicated", sum(damage), "==", 0))
    return lines


def met(value: float, op: str, target: float) -> bool:
    return {">=": value >= target, "<=": value <= target, "==": value == target}[op]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="scenarios, comma-separated")
    parser.add_argument("--agents", type=int, help="agents (sessions) of each scenario")
    parser.add_argument("--latency", type=float, help="the fake model's seconds per call")
    parser.add_argument("--timeout", type=float, help="seconds before a scenario is cut")
    parser.add_argument("--scenario", help=argparse.SUPPRESS)
    parser.add_argument("--template", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    overrides = {
        k: v
        for k, v in (("size", args.agents), ("latency", args.latency), ("deadline", args.timeout))
        if v is not None
    }
    if args.scenario:
        report = run_scenario(replace(SCENARIOS[args.scenario], **overrides), args.template)
        Path(args.report).write_text(json.dumps(report))
        return 0
    names = [n for only in args.only or [",".join(SCENARIOS)] for n in only.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    template = None
    if any(SCENARIOS[n].kind != "embedded" for n in names):
        server_url, template = make_template()
    reports: dict[str, dict | None] = {}
    try:
        for name in names:
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                command = [sys.executable, __file__, "--scenario", name, "--report", out.name]
                command += ["--template", template] if template else []
                for flag in ("agents", "latency", "timeout"):
                    if getattr(args, flag) is not None:
                        command += [f"--{flag}", str(getattr(args, flag))]
                code = subprocess.run(command, cwd=ROOT).returncode
                text = Path(out.name).read_text()
                reports[name] = json.loads(text) if code == 0 and text else None
                if reports[name] is None:
                    print(f"{name}: the scenario failed (exit {code})")
    finally:
        if template:
            admin_sql(server_url, f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    if {"size", "latency"} & overrides.keys():
        print("--agents/--latency: not the pinned scenarios, no RESULT lines")
        return 0 if all(reports.values()) else 1
    ok = all(reports.values())
    for metric, value, op, target in results(reports):
        print(f"RESULT scale {metric}={value:.3g} (target {op} {target:g})")
        ok = ok and met(value, op, target)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
