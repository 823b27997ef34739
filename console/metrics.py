"""The dashboard's counts and panels: a registry of metrics, each one query and a link to its
list; another app adds one with `register(Metric(...))` (or `register_panel(Panel(...))`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from collaboration.models import CollaborationSession, SessionStatus
from costs import selectors as cost_selectors
from costs.holds import held_agents_condition
from costs.models import BudgetAlert, UsageRecord
from organization.models import Agent, Organization
from organization.workload import held_statuses, offline_with_work
from routines.models import Routine
from routines.schedule import describe
from routines.selectors import routines_of
from runtime.models import Run, RunStatus
from runtime.selectors import held_wakes_condition, tasks_with_held_wakes
from tasks.admin import Attention, register_attention
from tasks.models import (
    DecisionStatus,
    DeliveryStatus,
    HumanDecision,
    Task,
    TaskStatus,
    WebhookDelivery,
)
from tasks.sweep import stale_queued

from .sql import at_capacity_count
from .words import usd_figure

# The groups, in the order the page shows them: (name, heading).
ATTENTION = "attention"
PEOPLE = "people"
COST = "cost"
GROUPS = [
    (ATTENTION, "Needs attention"),
    (PEOPLE, "People"),
    (COST, "Cost"),
]
# The sum of the attention group (pinned name).
NEEDS_ATTENTION = "needs_attention"

# Failures are events, not states: the dashboard counts those of the last week.
RECENT = timedelta(days=7)


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    value: Callable[[Organization], int | Decimal]
    link: Callable[[Organization], str]
    group: str
    # One line under the label: what exactly is counted.
    help: str = ""
    # How the value is written (the element's text): str() by default.
    text: Callable[[int | Decimal], str] = str


@dataclass(frozen=True)
class Panel:
    """A block of the dashboard under the counts: `template` rendered with `context(org)`."""

    name: str
    title: str
    template: str
    context: Callable[[Organization], dict] = field(default=lambda org: {})


METRICS: list[Metric] = []
PANELS: list[Panel] = []


def register(metric: Metric) -> Metric:
    """Add `metric` to the dashboard (after those already there); a name is taken once."""
    if metric.name == NEEDS_ATTENTION or any(m.name == metric.name for m in METRICS):
        raise ValueError(f"A dashboard metric is already named {metric.name!r}.")
    if metric.group not in dict(GROUPS):
        raise ValueError(f"Unknown dashboard group {metric.group!r}: one of {dict(GROUPS)}.")
    METRICS.append(metric)
    return metric


def register_panel(panel: Panel) -> Panel:
    if any(p.name == panel.name for p in PANELS):
        raise ValueError(f"A dashboard panel is already named {panel.name!r}.")
    PANELS.append(panel)
    return panel


# --- links ---------------------------------------------------------------------------------


def changelist(model, organization: Organization, **filters) -> str:
    """The admin list of `model`, filtered to `organization` and by `filters` (query values)."""
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    return f"{url}?{urlencode({**filters, 'organization__exact': organization.pk})}"


def recent_since():
    """The start of the "recent" window, on the hour (so a count and its link agree)."""
    return (timezone.now() - RECENT).replace(minute=0, second=0, microsecond=0)


def _recent(model, organization, **filters):
    return changelist(model, organization, **filters, created_at__gte=recent_since().isoformat())


# --- the metrics of the apps below ---------------------------------------------------------


def _tasks_in(status):
    def value(org):
        return Task.objects.filter(organization=org, status=status).count()

    def link(org):
        return changelist(Task, org, status__exact=status)

    return value, link


FAILED_SESSIONS = (SessionStatus.FAILED, SessionStatus.PARTIAL)

# First of all: what agents wait for a human to decide (docs/decisions.md).
register(
    Metric(
        "decisions_waiting",
        "Decisions waiting on you",
        lambda org: HumanDecision.objects.filter(
            organization=org, status=DecisionStatus.PENDING
        ).count(),
        lambda org: changelist(HumanDecision, org, status__exact=DecisionStatus.PENDING),
        ATTENTION,
        help="Moves a policy holds for approval, and agents' questions.",
    )
)
register(
    Metric(
        "escalated",
        "Escalated to humans",
        *_tasks_in(TaskStatus.ESCALATED),
        ATTENTION,
        help="No agent could take them: yours to assign or cancel.",
    )
)
register(
    Metric(
        "blocked",
        "Blocked",
        *_tasks_in(TaskStatus.BLOCKED),
        ATTENTION,
        help="Held but stuck (a managed agent's failed run blocks its task).",
    )
)
register(
    Metric(
        "stale_queued",
        "Queued too long",
        lambda org: stale_queued(timezone.now()).filter(organization=org).count(),
        lambda org: changelist(Task, org, attention="stale"),
        ATTENTION,
        help="Past the team rule's threshold or their deadline.",
    )
)
register(
    Metric(
        "failed_sessions",
        "Failed collaborations",
        lambda org: CollaborationSession.objects.filter(
            organization=org, status__in=FAILED_SESSIONS, created_at__gte=recent_since()
        ).count(),
        lambda org: _recent(CollaborationSession, org, status__in=",".join(FAILED_SESSIONS)),
        ATTENTION,
        help="Failed or partial, in the last 7 days.",
    )
)
register(
    Metric(
        "failed_runs",
        "Failed runs",
        lambda org: Run.objects.filter(
            organization=org, status=RunStatus.FAILED, created_at__gte=recent_since()
        ).count(),
        lambda org: _recent(Run, org, status__exact=RunStatus.FAILED),
        ATTENTION,
        help="Managed agents' runs, in the last 7 days.",
    )
)
register_attention(Attention("held_wakes", "Wake-ups held", lambda: Q(held_wakes_condition())))
register(
    Metric(
        "held_wakes",
        "Wake-ups held",
        lambda org: tasks_with_held_wakes(organization_id=org.pk).count(),
        lambda org: changelist(Task, org, held="yes"),
        ATTENTION,
        help="Tasks where managed agents woke one another past a bound: release them.",
    )
)
register(
    Metric(
        "failing_webhooks",
        "Failing webhooks",
        lambda org: WebhookDelivery.objects.filter(
            organization=org, status=DeliveryStatus.FAILED, created_at__gte=recent_since()
        ).count(),
        lambda org: _recent(WebhookDelivery, org, status__exact=DeliveryStatus.FAILED),
        ATTENTION,
        help="Deliveries failed for good, in the last 7 days.",
    )
)
register(
    Metric(
        "at_capacity",
        "At capacity",
        lambda org: at_capacity_count(organization_id=org.pk, statuses=held_statuses()),
        lambda org: changelist(Agent, org, load="at_capacity"),
        PEOPLE,
        help="Agents holding all the tasks they may: new work queues or escalates.",
    )
)
register(
    Metric(
        "offline_with_work",
        "Offline with work",
        lambda org: offline_with_work(Agent.objects.filter(organization=org)).count(),
        lambda org: changelist(Agent, org, load="offline_with_work"),
        PEOPLE,
        help="Paused agents who still have reports or a queue.",
    )
)


# --- the panel of the apps below: what waits on a human ------------------------------------

WAITING_SHOWN = 8


def _waiting_on_you(org: Organization) -> dict:
    """The most urgent escalated and blocked tasks, oldest first within an urgency (one query)."""
    tasks = (
        Task.objects.filter(organization=org, status__in=(TaskStatus.ESCALATED, TaskStatus.BLOCKED))
        .select_related("assignee")
        .order_by("-urgency_rank", "updated_at", "pk")[:WAITING_SHOWN]
    )
    return {"tasks": list(tasks)}


register_panel(
    Panel("waiting_on_you", "Waiting on you", "admin/console/panel_waiting.html", _waiting_on_you)
)


# --- the costs app's numbers (pinned names: budget_alerts, cost_today_usd, cost_month_usd) ----
# `costs` sits below `console`, so they are registered here, calling its selectors.


def _usage_link(org: Organization, since) -> str:
    return changelist(UsageRecord, org, created_at__gte=since.isoformat())


register(
    Metric(
        "budget_alerts",
        "Budget alerts",
        cost_selectors.unread_alert_count,
        lambda org: changelist(BudgetAlert, org, read_at__isnull="True"),
        ATTENTION,
        help="Budgets at 80 % or exhausted (agents held for budget among them).",
    )
)
register(
    Metric(
        "cost_today_usd",
        "Cost today (USD)",
        lambda org: cost_selectors.cost_since(org, cost_selectors.start_of_day()),
        lambda org: _usage_link(org, cost_selectors.start_of_day()),
        COST,
        help="Model calls since midnight UTC.",
        text=usd_figure,
    )
)
register(
    Metric(
        "cost_month_usd",
        "Cost this month (USD)",
        lambda org: cost_selectors.cost_since(org, cost_selectors.start_of_month()),
        lambda org: _usage_link(org, cost_selectors.start_of_month()),
        COST,
        help="Model calls since the 1st, UTC.",
        text=usd_figure,
    )
)


# A task whose holder a budget holds back waits on a human (raise the limit): the tasks list's
# attention filter gets the reason, the dashboard its count. Blocked tasks are counted as blocked.
HELD_FOR_BUDGET = register_attention(
    Attention(
        "budget",
        "Held for budget",
        lambda: (
            Q(status__in=(TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS))
            & held_agents_condition("assignee")
        ),
    )
)

register(
    Metric(
        "held_for_budget",
        "Held for budget",
        lambda org: (
            Task.objects.filter(organization=org).filter(HELD_FOR_BUDGET.condition()).count()
        ),
        lambda org: changelist(Task, org, attention=HELD_FOR_BUDGET.value),
        ATTENTION,
        help="Tasks whose managed holder a budget holds back: raise it, or reassign.",
    )
)


def _top_spenders(org: Organization) -> dict:
    """This month's costliest agents (one query), and the cost report of the same
    organization and month."""
    since = cost_selectors.start_of_month()
    query = urlencode({"organization": org.pk, "since": since.date().isoformat()})
    rows = cost_selectors.top_spenders(org, since)
    for row in rows:
        row["money"] = usd_figure(row["cost_usd"])
    return {
        "rows": rows,
        "report": f"{reverse('admin:costs_usagerecord_report')}?{query}",
    }


register_panel(
    Panel(
        "top_spenders",
        "Top spenders this month",
        "admin/console/panel_spenders.html",
        _top_spenders,
    )
)


# --- routines: recurring work, when it runs next and how it went last (docs/routines.md) ---

ROUTINES_SHOWN = 8


def _routines(org: Organization) -> dict:
    """The routines that run soonest, each with its last occurrence and outcome (one query)."""
    rows = list(routines_of(org)[:ROUTINES_SHOWN])
    for routine in rows:
        routine.schedule_words = describe(routine)
    return {"routines": rows, "all": changelist(Routine, org)}


register_panel(Panel("routines", "Routines", "admin/console/panel_routines.html", _routines))
