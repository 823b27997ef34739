"""An organization in which every dashboard metric is non-zero and different from the others
(bulk-created rows; the services are not what these tests are about)."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from collaboration.models import CollaborationSession, Contribution, SessionStatus
from costs.metering import current_period
from costs.models import LIFETIME, Budget, BudgetAlert, UsageRecord
from organization.models import Agent, Organization
from runtime.models import Run, RunStatus, RunTrigger
from tasks.models import (
    DeliveryStatus,
    HumanDecision,
    Task,
    TaskStatus,
    Urgency,
    WebhookDelivery,
)

# What build() makes, metric by metric (needs_attention is the sum of the attention group).
EXPECTED = {
    "decisions_waiting": 12,
    "escalated": 1,
    "blocked": 2,
    "stale_queued": 3,
    "failed_sessions": 4,
    "failed_runs": 5,
    "failing_webhooks": 6,
    "at_capacity": 7,
    "offline_with_work": 8,
    "budget_alerts": 9,
    "held_wakes": 10,
    "held_for_budget": 11,
    # The costs app's: what the ledger holds today and this month (USD).
    "cost_today_usd": Decimal("1.25"),
    "cost_month_usd": Decimal("3.75"),
}
EXPECTED["needs_attention"] = sum(
    EXPECTED[m]
    for m in (
        "decisions_waiting",
        "escalated",
        "blocked",
        "stale_queued",
        "failed_sessions",
        "failed_runs",
        "failing_webhooks",
        "budget_alerts",
        "held_wakes",
        "held_for_budget",
    )
)


def _session(org, status, **fields):
    return CollaborationSession(
        organization=org,
        task="Compare the options",
        status=status,
        max_parallel=3,
        agent_timeout=60,
        max_total_tokens=10_000,
        **fields,
    )


def build(org: Organization, prefix: str = "m") -> dict:
    """Rows in `org` giving EXPECTED; plus rows that must not count (old failures, fresh queue,
    a busy-but-not-full agent). Returns EXPECTED."""
    now = timezone.now()
    long_ago = now - timedelta(days=30)

    def agents(name, n, **fields):
        return Agent.objects.bulk_create(
            Agent(
                organization=org,
                handle=f"agent-{prefix}-{name}-{i}",
                name=f"{name.title()} {i}",
                **fields,
            )
            for i in range(n)
        )

    full = agents("full", 7)  # 5/5: at capacity
    # Managed, 11/12 (not at capacity), and held back by its $0 budget: its 11 tasks wait.
    held = agents("held", 1, runtime="managed", workload_capacity=12)[0]
    busy = agents("busy", 2)  # 4/5: busy, not at capacity
    offline = agents("away", 8, is_paused=True)  # each with a queued task or a report
    idle_offline = agents("gone", 2, is_paused=True)  # offline with nothing: not counted
    worker = agents("worker", 1)[0]

    def task(title, status, **fields):
        return Task(organization=org, title=title, status=status, **fields)

    tasks = []
    tasks += [
        task(f"held {a.handle} {i}", TaskStatus.ASSIGNED, assignee=a)
        for a in full
        for i in range(5)
    ]
    tasks += [
        task(f"held {a.handle} {i}", TaskStatus.IN_PROGRESS, assignee=a)
        for a in busy
        for i in range(4)
    ]
    tasks += [
        task(
            f"held by budget {i}",
            (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS)[i % 2],
            assignee=held,
        )
        for i in range(11)
    ]
    tasks += [task("Decide the vendor", TaskStatus.ESCALATED, urgency=Urgency.HIGH)]
    tasks += [task(f"Blocked {i}", TaskStatus.BLOCKED) for i in range(2)]
    tasks += [
        task(f"Stale {i}", TaskStatus.QUEUED, queued_at=now - timedelta(days=2)) for i in range(3)
    ]
    # Offline agents: four with a (fresh) queued task, four with a report.
    tasks += [
        task(f"Waiting on {a.handle}", TaskStatus.QUEUED, queued_for=a, queued_at=now)
        for a in offline[:4]
    ]
    tasks += [task(f"Done {i}", TaskStatus.COMPLETED) for i in range(3)]
    Task.objects.bulk_create(tasks)
    Agent.objects.bulk_create(
        Agent(
            organization=org, handle=f"agent-{prefix}-report-{i}", name=f"Report {i}", senior=boss
        )
        for i, boss in enumerate(offline[4:])
    )
    assert idle_offline

    CollaborationSession.objects.bulk_create(
        [_session(org, SessionStatus.FAILED) for _ in range(2)]
        + [_session(org, SessionStatus.PARTIAL) for _ in range(2)]
        + [_session(org, SessionStatus.COMPLETED)]
    )
    old = CollaborationSession.objects.bulk_create([_session(org, SessionStatus.FAILED)])
    CollaborationSession.objects.filter(pk=old[0].pk).update(created_at=long_ago)

    runs = Run.objects.bulk_create(
        [
            Run(organization=org, agent=worker, trigger="assigned", status=RunStatus.FAILED)
            for _ in range(6)
        ]
        + [Run(organization=org, agent=worker, trigger="assigned", status=RunStatus.COMPLETED)]
    )
    Run.objects.filter(pk=runs[0].pk).update(created_at=long_ago)

    # Ten tasks with a wake-up a bound holds (two on one of them), one released: not counted.
    waiting = Task.objects.bulk_create(
        task(f"Held wake {i}", TaskStatus.COMPLETED) for i in range(11)
    )
    RunTrigger.objects.bulk_create(
        [
            RunTrigger(organization=org, agent=worker, task=t, trigger="created", held="chain")
            for t in [*waiting[:10], waiting[0]]
        ]
        + [
            RunTrigger(
                organization=org, agent=worker, task=waiting[10], trigger="created", released_at=now
            )
        ]
    )

    deliveries = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                organization=org,
                agent=worker,
                url="https://hooks.example/x",
                status=DeliveryStatus.FAILED,
            )
            for _ in range(7)
        ]
        + [
            WebhookDelivery(
                organization=org,
                agent=worker,
                url="https://hooks.example/x",
                status=DeliveryStatus.DELIVERED,
            )
        ]
    )
    WebhookDelivery.objects.filter(pk=deliveries[0].pk).update(created_at=long_ago)

    # Nine unread budget alerts (one per budget: an alert is raised once per period) and one
    # read; $1.25 spent today, $2.50 earlier this month (today too, on the 1st), $10 last month.
    team_budgets = Budget.objects.bulk_create(
        Budget(organization=org, scope="agent", agent=a, limit_usd=1, period=LIFETIME)
        for a in [*full, *busy, worker]
    )
    Budget.objects.create(
        organization=org, scope="agent", agent=held, limit_usd=0, period=current_period()
    )
    BudgetAlert.objects.bulk_create(
        BudgetAlert(
            organization=org,
            budget=b,
            kind="warning",
            period="2026-01",
            message="80 %",
            read_at=now if i == 9 else None,
        )
        for i, b in enumerate(team_budgets)
    )
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    earlier = max(month_start, now - timedelta(days=1))
    ledger = UsageRecord.objects.bulk_create(
        usage_record(org, cost, agent=worker)
        for cost in (Decimal("1.25"), Decimal("2.50"), Decimal("10"))
    )
    UsageRecord.objects.filter(pk=ledger[1].pk).update(created_at=earlier)
    if earlier >= now.replace(hour=0, minute=0, second=0, microsecond=0):
        EXPECTED["cost_today_usd"] = EXPECTED["cost_month_usd"]  # the 1st: one and the same
    UsageRecord.objects.filter(pk=ledger[2].pk).update(created_at=month_start - timedelta(days=1))
    HumanDecision.objects.bulk_create(
        HumanDecision(organization=org, kind="question", question="?", status=status)
        for status in ["pending"] * 12 + ["answered", "expired"]
    )
    return EXPECTED


# Markup in an agent's words: every page must show it as text.
SCRIPT = "<script>alert('x')</script>"


def a_vote(org, **fields):
    """A completed vote of three agents, two yes and one no, with markup in the words."""
    session = CollaborationSession.objects.create(
        organization=org,
        task="Ship on Friday?",
        status="completed",
        synthesis="vote",
        max_parallel=3,
        agent_timeout=60,
        max_total_tokens=10_000,
        result=f"VERDICT: yes {SCRIPT}",
        **fields,
    )
    for i, (key, verdict, answer) in enumerate(
        [
            ("agent-a", "yes", "The tests pass. Ship it."),
            ("agent-b", "Yes", "Fine by me."),
            ("agent-c", "no", f"The migration is not reversible. {SCRIPT}"),
        ]
    ):
        Contribution.objects.create(
            session=session,
            position=i,
            agent_key=key,
            status="completed",
            verdict=verdict,
            confidence=0.8,
            response=answer,
            tokens_used=100 + i,
        )
    return session


def usage_record(org, cost, **fields) -> UsageRecord:
    """An unsaved ledger row: one run's call on gpt-4o-mini that cost `cost` dollars."""
    return UsageRecord(
        organization=org,
        purpose="run",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=Decimal(cost),
        price_source="genai-prices",
        **fields,
    )
