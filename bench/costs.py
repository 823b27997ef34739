"""Benchmark: what the cost ledger and the budgets add to each model call, and that concurrent
sessions never spend past a budget (issue 12 §4).

The sessions run in this process (`collaboration.runner.run_session`, the code a worker runs)
against the fake LLM server of tests/fake_llm.py (a real HTTP server on 127.0.0.1, OpenAI wire
format, through the real `openai` SDK) at zero latency, so the bookkeeping is a large share of
each call. The model is priced with LLM_PRICES.

- **Overhead**: the same session (5 parallel specialists + the synthesis: 6 calls) run SESSIONS
  times with the ledger and budgets on (an organization, a team and an agent budget cover every
  call: each call reserves against them in one transaction and settles in another) and off (the
  calls made without a meter: no ledger row, no budget), interleaved. overhead_ms_per_call =
  (p50 session wall time on − p50 off) / 6. Next to it, the same difference for one call alone
  (`providers.complete` with and without a meter, CALLS each).
- **Overspend**: CONCURRENT sessions of 4 specialists start at once against an organization
  budget that fits about a third of their calls. overspend_usd = max(0, what the ledger booked −
  the limit); the budget's own counters must equal the ledger, and nothing may stay held.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/costs.py
    make bench

It creates and drops a database of its own, and claims (and empties) a Redis database of its own.
"""

import contextlib
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_database, redis_cleanup  # noqa: E402

SESSIONS = 30
CALLS = 300
AGENTS = 5
CONCURRENT = 8
TARGET_OVERHEAD_MS = 5.0
PRICES = '{"openai/fake": {"input": 1, "output": 2}}'
LIMITS = {"COLLAB_MAX_AGENTS": "6", "COLLAB_MAX_PARALLEL": "5", "COLLAB_AGENT_TIMEOUT": "30",
          "COLLAB_MAX_STARTS_PER_HOUR": "100000", "LLM_PRICES": PRICES,
          "COLLAB_IDLE_CLOSE_SECONDS": "0"}  # fmt: skip


@contextlib.contextmanager
def ledger_off():
    """The calls made without a meter: exactly the path before the ledger."""
    from collaboration.runner import agent

    class NoMeter:
        @staticmethod
        def for_agent(*args, **kwargs):
            return None

    original, agent.Meter = agent.Meter, NoMeter
    try:
        yield
    finally:
        agent.Meter = original


def session_ms(caller, payload) -> float:
    from collaboration import runner
    from collaboration.models import CollaborationSession
    from collaboration.services import session_create

    session = session_create(caller=caller, payload=payload)
    runner.run_session(session.pk)
    session = CollaborationSession.objects.get(pk=session.pk)
    assert session.status == "completed", (session.status, session.error)
    return (session.finished_at - session.started_at).total_seconds() * 1000


def one_call_ms(meter) -> float:
    from collaboration import providers
    from collaboration.providers import LLMRequest

    request = LLMRequest(system="You are a reviewer.", prompt="Bench call", model="fake",
                         max_tokens=256, deadline=time.monotonic() + 30, label="bench")  # fmt: skip
    t0 = time.perf_counter()
    providers.complete("openai", request, meter=meter)
    return (time.perf_counter() - t0) * 1000


def overhead(org, caller, team_agent) -> tuple[float, float]:
    from costs.budgets import budget_set
    from costs.metering import Meter

    budget_set(caller=caller, scope="organization", limit_usd="1000000")
    budget_set(caller=caller, scope="team", team=team_agent.team.name, limit_usd="1000000")
    budget_set(caller=caller, scope="agent", agent=team_agent.handle, limit_usd="1000000")
    payload = {
        "task": "Review the cache design",
        "agents": [{"agent_id": team_agent.handle, "focus": "lead"}]
        + [{"name": f"s{i}", "role": "reviewer", "focus": "risk"} for i in range(AGENTS - 1)],
        "mode": "parallel",
        "max_parallel": AGENTS,
    }
    for _ in range(3):  # warm up both paths
        session_ms(caller, payload)
        with ledger_off():
            session_ms(caller, payload)
    on, off = [], []
    for _ in range(SESSIONS):
        on.append(session_ms(caller, payload))
        with ledger_off():
            off.append(session_ms(caller, payload))
    calls = AGENTS + 1
    per_call = (statistics.median(on) - statistics.median(off)) / calls
    print(f"sessions of {calls} calls, p50 wall: ledger on {statistics.median(on):.1f} ms, "
          f"off {statistics.median(off):.1f} ms → {per_call:.2f} ms per call")  # fmt: skip
    meter = Meter.for_agent(team_agent, "run")
    for _ in range(20):
        one_call_ms(meter), one_call_ms(None)
    call_on, call_off = [], []
    for _ in range(CALLS):
        call_on.append(one_call_ms(meter))
        call_off.append(one_call_ms(None))
    single = statistics.median(call_on) - statistics.median(call_off)
    print(f"one call alone, p50: with meter and 3 budgets {statistics.median(call_on):.2f} ms, "
          f"without {statistics.median(call_off):.2f} ms → {single:.2f} ms")  # fmt: skip
    return per_call, single


def overspend(caller) -> tuple[Decimal, Decimal, Decimal, int, int]:
    from collaboration import runner
    from collaboration.services import session_create
    from costs.budgets import budget_set
    from costs.models import Budget, UsageRecord
    from tests.concurrency import run_at_once

    UsageRecord.objects.all().delete()
    Budget.objects.all().delete()
    payload = {
        "task": "Estimate the migration",
        "agents": [{"name": f"c{i}", "role": "estimator", "focus": "cost"} for i in range(4)],
        "max_parallel": 4,
    }
    sessions = [session_create(caller=caller, payload=payload) for _ in range(CONCURRENT)]
    # A limit that fits about a third of the calls' worst cases (each holds ~$0.0021).
    limit = Decimal("0.02")
    budget_set(caller=caller, scope="organization", limit_usd=limit)
    run_at_once([lambda s=s: runner.run_session(s.pk) for s in sessions])
    budget = Budget.objects.get(scope="organization")
    booked = sum((r.cost_usd or 0 for r in UsageRecord.objects.all()), Decimal(0))
    calls = UsageRecord.objects.count()
    planned = CONCURRENT * 5
    print(f"{CONCURRENT} sessions at once on a ${limit} budget: {calls} of {planned} calls made, "
          f"${booked} booked, budget spent ${budget.spent_usd}, held ${budget.reserved_usd}")  # fmt: skip
    return max(booked - limit, Decimal(0)), booked, budget.spent_usd, calls, planned


def main() -> int:
    with redis_cleanup() as redis_db:
        os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", **LIMITS)
        os.environ.pop("TEST_DATABASE_NAME", None)
        with bench_database("bench_costs", needs_redis=True):
            results = run()
    left = redis_db.left
    print(f"redis {redis_db.url}: emptied, {left} keys left")
    (per_call, single), (over, booked, spent, calls, planned) = results
    consistent = booked == spent and 0 < calls < planned
    if not consistent:
        print("the budget's counters and the ledger disagree, or nothing was refused")
    print(f"RESULT costs overhead_ms_per_call={per_call:.2f} (target <= {TARGET_OVERHEAD_MS:g})")
    print(f"RESULT costs overspend_usd={over} (target == 0)")
    return 0 if per_call <= TARGET_OVERHEAD_MS and over == 0 and consistent and left == 0 else 1


def run():
    from organization.caller import caller_for_member
    from tests.factories import make_admin_user, make_agent, make_org, make_team
    from tests.fake_llm import FakeLLM

    org = make_org("bench-costs")
    lead = make_agent(org, "agent-lead", name="Lead", team=make_team(org, "Platform"))
    caller = caller_for_member(make_admin_user(org, username="bench"), org)
    with FakeLLM(latency=0.0) as fake:
        os.environ.update(fake.env(), LLM_PROVIDER="openai", LLM_MODEL="fake")
        from django.conf import settings

        settings.LLM_PROVIDER, settings.LLM_MODEL = "openai", "fake"
        return overhead(org, caller, lead), overspend(caller)


if __name__ == "__main__":
    sys.exit(main())
