"""Benchmark: managed agents (issue 11 §4) — 50 of them, on two real Celery workers.

An organization of 50 managed agents in three levels — 2 directors, 8 leads (a domain each, half
reporting to each director), 40 experts (a skill each, 5 per lead) — on PostgreSQL; two
`celery -A config worker -P threads` processes on Redis; the fake provider of tests/fake_llm.py (a
real HTTP server on 127.0.0.1, OpenAI wire format, reached through the real `openai` SDK) at a
fixed 200 ms per call. Its replies are scripted by the offline routine's own decisions
(`runtime.offline.decide`, over the wire): delegation to the right expert by
`recommend_delegate`, subtasks, completion. 200 tasks enter at the top, half for each director:

- 150 need an expert's skill: the director delegates to that expert, who completes it;
- 50 need a lead's domain and list two parts: the director delegates to the lead, who splits
  it into two subtasks for two of its experts, who complete them; the last one wakes the lead,
  who completes the task from their results.

Targets:

- **tool_call_ms_p50** — the median time of a tool call as the runtime makes it, all in: the
  call's own transaction (the move, its audit row, inbox and wake-ups) and its record, as the
  run measured it (`ms` on each tool call's turn). The many-agents figures are bench/scale.py's.
- **lost_or_duplicated** — tasks not completed, events written twice (same task, kind, actor,
  before and after), runs started twice (claimed more than once, or two runs of one agent
  overlapping), runs left unfinished or triggers left waiting, and an audit replay: each task's
  events must chain (each `before` the previous `after`, from `created` to the task as it is).

Printed, not targets: the runtime's own time per model turn (wall − provider − tools), the
efficiency against the longest causal chain of model calls, and the busy-slot ceiling.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/runtime.py [--detail] [--concurrency N]
    make bench

`--detail` prints the slowest runs' timelines; `--concurrency N` runs N threads in each worker
instead of 4 (no RESULT lines then).

It creates and drops a database of its own on the server of DATABASE_URL, and uses an empty Redis
database of its own, emptied at the end.
"""

import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (  # noqa: E402
    ROOT,
    audit_trail_damage,
    bench_database,
    quiet,
    redis_cleanup,
    start_celery_workers,
    stop_workers,
    wait_until,
)

LATENCY = 0.2
TASKS = 200
COMPOSITE_EVERY = 4  # one task in four needs a lead's domain and two experts
WORKERS = 2
# The pinned configuration: 2 processes x 4 threads. `--concurrency N` runs N threads a process
# instead, to see how the figures move when the two cores are not shared by 8 busy slots; such a
# run prints no RESULT lines (its figures are not the targets').
PINNED_CONCURRENCY = 4
CONCURRENCY = (
    int(sys.argv[sys.argv.index("--concurrency") + 1])
    if "--concurrency" in sys.argv
    else PINNED_CONCURRENCY
)
TARGET_TOOL_CALL_MS = 6.0
DIRECTORS = [f"agent-dir-{d}" for d in range(2)]
LEADS = 8
EXPERTS_PER_LEAD = 5
TIMEOUT = 300


# --- the organization -------------------------------------------------------------------------


def build_org():
    """50 managed agents in three levels, all on the openai provider (the fake server)."""
    from organization.models import Agent, AgentRuntime, Organization, Team, TeamRule

    org = Organization.objects.create(slug="bench-runtime", name="Bench runtime")
    TeamRule.objects.create(organization=org)
    board = Team.objects.create(organization=org, name="Board")
    teams = [Team.objects.create(organization=org, name=f"Team {j}") for j in range(LEADS)]
    common = {"organization": org, "runtime": AgentRuntime.MANAGED, "llm_provider": "openai",
              "llm_model": "fake"}  # fmt: skip
    directors = [
        Agent.objects.create(handle=h, name=f"Director {d}", role="Director", team=board,
                             expertise=["Direction"], workload_capacity=TASKS, **common)
        for d, h in enumerate(DIRECTORS)
    ]  # fmt: skip
    for j in range(LEADS):
        lead = Agent.objects.create(
            handle=f"agent-lead-{j}", name=f"Lead {j}", role="Lead", team=teams[j],
            senior=directors[j % 2], expertise=[f"domain-{j}"], workload_capacity=50, **common,
        )  # fmt: skip
        for i in range(EXPERTS_PER_LEAD):
            Agent.objects.create(
                handle=f"agent-expert-{j}{i}", name=f"Expert {j}{i}", role="Engineer",
                team=teams[j], senior=lead, expertise=[f"skill-{j}{i}"], workload_capacity=20,
                **common,
            )  # fmt: skip
    assert Agent.objects.filter(organization=org).count() == 50
    return org


def create_tasks(org) -> list[int]:
    """The 200 tasks, created by a human for the directors, in one transaction."""
    from django.db import transaction

    from tasks.models import ActorKind
    from tasks.rules import Actor
    from tasks.services import task_create

    human = Actor(ActorKind.USER, "bench")
    directors = list(org.agents.filter(handle__in=DIRECTORS).order_by("handle"))
    ids = []
    with transaction.atomic():
        for n in range(TASKS):
            j, i = n % LEADS, n % EXPERTS_PER_LEAD
            if n % COMPOSITE_EVERY == COMPOSITE_EVERY - 1:
                k = (i + 1) % EXPERTS_PER_LEAD
                fields = {
                    "title": f"Bench composite {n}", "required_expertise": f"domain-{j}",
                    "description": f"Two parts:\n- Part A of {n} (skill-{j}{i})\n"
                                   f"- Part B of {n} (skill-{j}{k})",
                }  # fmt: skip
            else:
                fields = {"title": f"Bench task {n}", "required_expertise": f"skill-{j}{i}"}
            task = task_create(org=org, actor=human, assignee=directors[n % 2], **fields)
            ids.append(task.pk)
    return ids


# --- the scripted model -------------------------------------------------------------------------


class Script:
    """The fake provider's replies: the offline routine's decisions, over the OpenAI wire. The
    directors route everything (they do not split: that is the leads' job)."""

    def __init__(self):
        from collaboration.providers import LLMRequest, Message, ToolCall
        from runtime.context import context_of
        from runtime.offline import decide

        self.LLMRequest, self.Message, self.ToolCall = LLMRequest, Message, ToolCall
        self.context_of, self.decide = context_of, decide

    def _decided(self, call):
        if "_decided" not in call.__dict__:
            messages = []
            for m in call.messages:
                if m["role"] == "user":
                    messages.append(self.Message.user(m["content"]))
                elif m["role"] == "assistant":
                    calls = [self.ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                             for c in m["tool_calls"]]  # fmt: skip
                    messages.append(self.Message.assistant(m["content"], calls))
                else:
                    messages.append(self.Message.tool_result(m["tool_call_id"], m["content"]))
            context = self.context_of(next(m.content for m in messages if m.role == "user"))
            if context["agent"]["id"] in DIRECTORS:
                context["agent"]["reports"] = []
            request = self.LLMRequest(system=call.system, prompt="", model=call.model,
                                      messages=messages)  # fmt: skip
            call.__dict__["_decided"] = self.decide(request, context=context)
        return call.__dict__["_decided"]

    def text(self, call) -> str:
        return self._decided(call)[0]

    def tool_calls(self, call):
        from tests.fake_llm import ToolUse

        return [ToolUse(c.name, c.arguments, id=c.id) for c in self._decided(call)[1]]


# --- workers ------------------------------------------------------------------------------------


def start_workers(env: dict, logdir: Path) -> list:
    return start_celery_workers(env, logdir, name="runtime", count=WORKERS,
                                concurrency=CONCURRENCY)  # fmt: skip


def warm_up() -> None:
    """A small organization's task, so that both workers have imported the SDK and opened their
    connections before the measured run (not measured)."""
    from organization.models import Agent, AgentRuntime, Organization
    from tasks.models import ActorKind, Task
    from tasks.rules import Actor
    from tasks.services import task_create

    org = Organization.objects.create(slug="bench-warm", name="Warm-up")
    agents = [
        Agent.objects.create(
            organization=org,
            handle=f"agent-warm-{n}",
            name=f"Warm {n}",
            runtime=AgentRuntime.MANAGED,
            llm_provider="openai",
            llm_model="fake",
        )  # fmt: skip
        for n in range(WORKERS * CONCURRENCY)
    ]
    for agent in agents:
        task_create(org=org, actor=Actor(ActorKind.USER, "bench"), title="warm", assignee=agent)
    if not wait_until(lambda: quiet(org), timeout=120):
        sys.exit("bench/runtime.py: the warm-up did not finish; see var/bench-runtime-worker-*.log")
    assert not Task.objects.filter(organization=org).exclude(status="completed").exists()


# --- the figures --------------------------------------------------------------------------------


def overhead_ms_per_turn(runs) -> tuple[float, float, int, float, float]:
    """(the runtime's own ms per model turn, the same with the tools' execution included, model
    turns, provider seconds, tool seconds) over the runs."""
    wall_ms, turns, provider_ms, tool_ms = 0.0, 0, 0.0, 0.0
    for run in runs:
        models = [t for t in run.turns if t["kind"] == "model"]
        wall_ms += (run.finished_at - run.started_at).total_seconds() * 1000
        provider_ms += sum(t.get("provider_ms", 0) for t in models)
        tool_ms += sum(t.get("ms", 0) for t in run.turns if t["kind"] == "tool_call")
        turns += len(models)
    per_turn = max(turns, 1)
    return ((wall_ms - provider_ms - tool_ms) / per_turn, (wall_ms - provider_ms) / per_turn,
            turns, provider_ms / 1000, tool_ms / 1000)  # fmt: skip


def ideal_seconds(runs) -> tuple[float, float]:
    """(the longest causal chain of model calls, all model calls over the slots), in seconds."""
    by_id = {run.pk: run for run in runs}
    cost = {run.pk: sum(t["kind"] == "model" for t in run.turns) * LATENCY for run in runs}
    memo: dict[int, float] = {}

    def chain(pk: int) -> float:
        if pk not in memo:
            causes = {t.woken_by_id for t in by_id[pk].triggers.all() if t.woken_by_id in by_id}
            memo[pk] = cost[pk] + max((chain(c) for c in causes), default=0.0)
        return memo[pk]

    longest = max((chain(pk) for pk in by_id), default=0.0)
    throughput = sum(cost.values()) / (WORKERS * CONCURRENCY)
    return longest, throughput


def lost_or_duplicated(org, runs, task_ids) -> tuple[int, dict]:
    from runtime.models import RunTrigger
    from tasks.models import Task

    tasks = Task.objects.filter(organization=org)
    found = {
        "top_tasks_not_completed": tasks.filter(pk__in=task_ids).exclude(status="completed")
        .count(),
        "subtasks_not_completed": tasks.filter(parent__isnull=False).exclude(status="completed")
        .count(),
        "runs_unfinished": sum(not run.is_finished or run.status != "completed" for run in runs),
        "triggers_waiting": RunTrigger.objects.filter(organization=org, run__isnull=True).count(),
        "runs_started_twice": sum(run.attempts != 1 for run in runs),
        **audit_trail_damage(org),
    }  # fmt: skip
    by_agent = defaultdict(list)
    for run in runs:
        by_agent[run.agent_id].append((run.started_at, run.finished_at))
    overlapping = 0
    for spans in by_agent.values():
        spans.sort()
        overlapping += sum(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    found["runs_overlapping"] = overlapping
    return sum(found.values()), found


# --- main ---------------------------------------------------------------------------------------


def run(workers: list) -> tuple[float, int]:
    from django.db.models import Max, Prefetch

    from runtime.models import Run, RunTurn
    from tests.fake_llm import FakeLLM, Reply

    script = Script()
    with FakeLLM(latency=LATENCY, default=Reply(text=script.text, tool_calls=script.tool_calls)) \
            as fake:  # fmt: skip
        env = {**os.environ, **fake.env(), "LLM_PROVIDER": "openai", "LLM_MODEL": "fake"}
        logdir = ROOT / "var"
        logdir.mkdir(exist_ok=True)
        workers += start_workers(env, logdir)
        warm_up()
        org = build_org()
        fake.reset()
        print(f"{WORKERS} worker processes x {CONCURRENCY} threads; fake LLM {LATENCY * 1000:.0f} "
              f"ms per call; 50 managed agents (2 directors, {LEADS} leads, "
              f"{LEADS * EXPERTS_PER_LEAD} experts); {TASKS} tasks at the top")  # fmt: skip
        started = time.time()
        task_ids = create_tasks(org)
        if not wait_until(lambda: quiet(org), timeout=TIMEOUT, interval=0.2):
            print(f"not quiet after {TIMEOUT} s: see var/bench-runtime-worker-*.log")
        calls, peak = len(fake.calls), fake.peak_concurrency
    runs = list(
        Run.objects.filter(organization=org)
        .select_related("agent")
        .prefetch_related("triggers", Prefetch("turn_rows", RunTurn.objects.order_by("index")))
        .order_by("pk")
    )
    last = Run.objects.filter(organization=org).aggregate(Max("finished_at"))["finished_at__max"]
    wall = (last.timestamp() - started) if last else float("inf")
    finished = [r for r in runs if r.started_at and r.finished_at]
    overhead, with_tools, turns, provider_s, tool_s = overhead_ms_per_turn(finished)
    longest, throughput = ideal_seconds(finished)
    ideal = max(longest, throughput)
    efficiency = ideal / wall
    damage, detail = lost_or_duplicated(org, runs, task_ids)
    tool_calls = sum(t["kind"] == "tool_call" for r in runs for t in r.turns)
    print(f"{len(runs)} runs, {turns} model turns ({calls} provider calls, peak {peak} in "
          f"flight), {tool_calls} tool calls; wall {wall:.2f} s")  # fmt: skip
    print(f"provider time {provider_s:.1f} s, tool execution (the engine's moves) {tool_s:.1f} s "
          f"in all; per model turn: wall - provider = {with_tools:.1f} ms, of which the runtime's "
          f"own (not the tools' execution) {overhead:.1f} ms")  # fmt: skip
    print(f"ideal {ideal:.2f} s = max(longest causal chain {longest:.2f} s, {turns} calls x "
          f"{LATENCY:g} s / {WORKERS * CONCURRENCY} slots = {throughput:.2f} s); "
          f"efficiency {efficiency:.3f}")  # fmt: skip
    # A worker slot holds a run for its model calls, its tools and the runtime's own work: with
    # no slot ever idle (nor any run waiting on the causal chain), the efficiency could read at
    # most the ideal model time's share of that, at this run's cost per call.
    held_s = provider_s + tool_s + overhead * turns / 1000
    print(f"busy-slot ceiling {turns * LATENCY / held_s:.3f} = {turns} calls x {LATENCY:g} s / "
          f"the slots' time held by runs {held_s:.1f} s (provider {provider_s:.1f} + tools "
          f"{tool_s:.1f} + the runtime's own {held_s - provider_s - tool_s:.1f}): the efficiency "
          f"with no slot idle, at this cost per call (not a target)")  # fmt: skip
    tool_ms = sorted(t["ms"] for r in runs for t in r.turns if t["kind"] == "tool_call")
    tool_p50 = statistics.median(tool_ms) if tool_ms else float("inf")
    print(
        f"tool calls as the runtime made them (each its transaction and record): p50 "
        f"{tool_p50:.1f} ms, p90 {tool_ms[int(len(tool_ms) * 0.9)] if tool_ms else 0:.1f} ms"
    )
    print("audit: " + ", ".join(f"{k}={v}" for k, v in detail.items()))
    if "--detail" in sys.argv:
        details(org, runs, task_ids)
    return tool_p50, damage


def details(org, runs, task_ids) -> None:
    """--detail: the slowest runs and the tasks not completed."""
    from tasks.models import Task, TaskEvent

    def spent(run):
        models = [t for t in run.turns if t["kind"] == "model"]
        wall = (run.finished_at - run.started_at).total_seconds() * 1000
        return wall - sum(t.get("provider_ms", 0) for t in models), wall, len(models)

    for run in sorted(runs, key=lambda r: -spent(r)[0])[:15]:
        over, wall, models = spent(run)
        calls = sum(t["kind"] == "tool_call" for t in run.turns)
        queued = (run.started_at - run.created_at).total_seconds() * 1000
        print(f"  run {run.pk} {run.agent.handle} {run.trigger} tasks={run.triggers.count()} "
              f"turns={models} calls={calls} wall={wall:.0f}ms overhead={over:.0f}ms "
              f"queued={queued:.0f}ms {run.status} {run.error[:80]}")  # fmt: skip
    for run in sorted(runs, key=lambda r: -spent(r)[0])[:4]:
        turn_timeline(run)
    by_tool = defaultdict(list)
    for run in runs:
        for t in run.turns:
            if t["kind"] == "tool_call" and "ms" in t:
                by_tool[t["name"]].append(t["ms"])
    for name, samples in sorted(by_tool.items()):
        samples.sort()
        print(f"  {name}: {len(samples)} calls, p50 {samples[len(samples) // 2]:.1f} ms, "
              f"max {samples[-1]:.1f} ms")  # fmt: skip
    timeline(runs)
    for task in Task.objects.filter(pk__in=task_ids).exclude(status="completed"):
        print(f"  task {task.pk} {task.title} {task.status} {task.assignee} {task.queued_for}")
        for e in TaskEvent.objects.filter(task=task).order_by("pk"):
            print(f"    {e.kind} {e.actor_label} {e.message[:120]}")


def turn_timeline(run) -> None:
    """--detail: where a run's time went, turn by turn (ms from its start); consecutive calls
    of one tool are summed on one line."""
    origin = run.started_at.timestamp()
    print(f"  run {run.pk} {run.agent.handle}: started {origin - run.created_at.timestamp():.3f} s"
          f" after it was queued")  # fmt: skip
    lines: list[list] = []
    for t in run.turns:
        if t["kind"] == "model":
            lines.append(["model", 1, t.get("provider_ms", 0), None, None])
            continue
        start = datetime.fromisoformat(t["started_at"]).timestamp() - origin if "started_at" in t \
            else None  # fmt: skip
        end = start + t.get("ms", 0) / 1000 if start is not None else None
        if lines and lines[-1][0] == t["name"]:
            line = lines[-1]
            line[1] += 1
            line[2] += t.get("ms", 0)
            # A run's calls run one after another: the first one starts the line, the last ends it.
            line[3] = start if line[3] is None else line[3]
            line[4] = end if end is not None else line[4]
        else:
            lines.append([t["name"], 1, t.get("ms", 0), start, end])
    for name, n, ms, start, end in lines:
        span = f" from {start * 1000:7.0f} to {end * 1000:7.0f} ms" if start is not None else ""
        print(f"    {name:22s} x{n:<4d} {ms:8.1f} ms{span}")
    print(f"    finished at {(run.finished_at.timestamp() - origin) * 1000:7.0f} ms")


def timeline(runs) -> None:
    """Runs running and runs waiting for a worker, every half second of the measured run."""
    spans = [r for r in runs if r.started_at and r.finished_at]
    if not spans:
        return
    origin = min(r.created_at for r in spans)
    end = max(r.finished_at for r in spans)
    step, t = 0.5, 0.0
    print("  time  running  waiting (queued, not started)  busy agents")
    while origin.timestamp() + t <= end.timestamp():
        at = origin.timestamp() + t
        running = [r for r in spans if r.started_at.timestamp() <= at < r.finished_at.timestamp()]
        waiting = [r for r in spans if r.created_at.timestamp() <= at < r.started_at.timestamp()]
        kinds = Counter(r.agent.handle.split("-")[1] for r in running)
        print(f"  {t:4.1f}  {len(running):7d}  {len(waiting):7d}  {dict(kinds)}")
        t += step


def main() -> int:
    with redis_cleanup() as redis_db:
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        os.environ.pop("TEST_DATABASE_NAME", None)
        workers: list[subprocess.Popen] = []
        with bench_database("bench_runtime", needs_redis=True):
            try:
                results = run(workers)
            finally:
                stop_workers(workers)  # before the database is dropped
    left = redis_db.left
    print(f"redis {redis_db.url}: emptied, {left} keys left")
    tool_p50, damage = results
    if CONCURRENCY != PINNED_CONCURRENCY:
        print(f"--concurrency {CONCURRENCY}: not the pinned configuration, no RESULT lines")
        return 0 if damage == 0 and left == 0 else 1
    print(f"RESULT runtime tool_call_ms_p50={tool_p50:.1f} (target <= {TARGET_TOOL_CALL_MS:g})")
    print(f"RESULT runtime lost_or_duplicated={damage} (target == 0)")
    return 0 if tool_p50 <= TARGET_TOOL_CALL_MS and damage == 0 and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
