"""An agent's live state, for the top of its admin page: its load, held tasks and queue, recent
decisions and runs, its month's cost against its budgets, and what a manager should be warned
of. A fixed number of queries whatever the agent's history; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Max, Sum, Window
from django.urls import reverse
from django.utils import timezone

from costs import selectors as cost_selectors
from costs.budgets import blocking_budget, current_view, state_of
from costs.metering import Meter
from costs.models import ZERO, Budget, UsageRecord
from organization.admin.display import colour_of, human
from organization.models import Agent
from organization.workload import status_for
from runtime.models import Run
from tasks.models import HELD_STATUSES, DeliveryStatus, Task, TaskEvent, TaskStatus, WebhookDelivery

from .story import Moment, moment_of
from .words import money

# How many rows each list of the panel shows (the lists behind the links have them all).
SHOWN = 10
# Failed webhook deliveries younger than this make a warning (as the dashboard's count).
WEBHOOK_WINDOW = timedelta(days=7)


@dataclass
class Warning:
    level: str  # "danger" or "warn"
    text: str
    link: str = ""
    link_text: str = ""


@dataclass
class BudgetLine:
    name: str
    state: str
    colour: str
    spent: str
    limit: str
    percent: int
    link: str


@dataclass
class AgentState:
    status: str
    status_label: str
    colour: str
    workload: int
    capacity: int
    percent: int
    held: list[tuple[Task, str]]  # (task, its status in words)
    queue: list[Task]
    queue_total: int
    decisions: list[tuple[TaskEvent, Moment]]
    runs: list[dict]
    month_cost: str
    budgets: list[BudgetLine]
    warnings: list[Warning] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)


def _percent(part, whole) -> int:
    if not whole:
        return 100 if part else 0
    return max(0, min(100, int(part * 100 / whole)))


def _changelist(name: str, **filters) -> str:
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    return f"{reverse(f'admin:{name}_changelist')}?{query}"


def budget_lines(agent: Agent) -> list[BudgetLine]:
    """The monthly budgets that cover the agent's calls (its organization's, its team's, its
    own), each as spent / limit this month (one query)."""
    covering = (
        Budget.objects.filter(Meter.for_agent(agent, purpose="run").covering())
        .select_related("organization", "team", "agent")
        .order_by("pk")
    )
    lines = []
    for budget in covering:
        budget = current_view(budget)
        state = state_of(budget)
        lines.append(
            BudgetLine(
                name=f"{human(budget.scope)}: {budget.subject}",
                state=state,
                colour=colour_of("budget", state),
                spent=money(budget.spent_usd),
                limit=money(budget.limit_usd),
                percent=_percent(budget.spent_usd + budget.reserved_usd, budget.limit_usd),
                link=reverse("admin:costs_budget_change", args=[budget.pk]),
            )
        )
    return lines


def _first_and_total(tasks, *order) -> tuple[list[Task], int]:
    """The first SHOWN of `tasks` and how many there are, in one query (a window's count is
    taken before the LIMIT), whatever their number."""
    rows = list(tasks.annotate(total=Window(Count("pk"))).order_by(*order)[:SHOWN])
    return rows, rows[0].total if rows else 0


def agent_state(agent: Agent) -> AgentState:
    now = timezone.now()
    held, workload = _first_and_total(
        Task.objects.filter(assignee=agent, status__in=HELD_STATUSES),
        "-urgency_rank",
        "assigned_at",
        "pk",
    )
    queue, queue_total = _first_and_total(
        Task.objects.filter(queued_for=agent, status=TaskStatus.QUEUED),
        "-urgency_rank",
        "queued_at",
        "pk",
    )
    status = status_for(
        is_paused=agent.is_paused, workload=workload, capacity=agent.workload_capacity
    )

    events = (
        TaskEvent.objects.filter(actor_agent=agent)
        .exclude(decision="")
        .select_related("task")
        .order_by("-created_at", "-pk")[:SHOWN]
    )
    decisions = [(event, moment_of(event)) for event in events]

    runs = list(Run.objects.filter(agent=agent).select_related("task").order_by("-pk")[:SHOWN])
    run_costs = dict(
        UsageRecord.objects.filter(run_id__in=[r.pk for r in runs])
        .values("run_id")
        .annotate(total=Sum("cost_usd"))
        .values_list("run_id", "total")
    )
    run_rows = [
        {
            "run": run,
            "status": human(run.status),
            "colour": colour_of("run", run.status),
            "trigger": human(run.trigger),
            "tokens": run.prompt_tokens + run.completion_tokens,
            "cost": money(run_costs.get(run.pk)),
        }
        for run in runs
    ]

    month_cost = cost_selectors.total_cost(
        agent=agent, created_at__gte=cost_selectors.start_of_month()
    )
    budgets = budget_lines(agent)

    state = AgentState(
        status=status,
        status_label=human(status),
        colour=colour_of("agent", status),
        workload=workload,
        capacity=agent.workload_capacity,
        percent=_percent(workload, agent.workload_capacity),
        held=[(task, human(task.status)) for task in held],
        queue=queue,
        queue_total=queue_total,
        decisions=decisions,
        runs=run_rows,
        month_cost=money(month_cost or ZERO),
        budgets=budgets,
        links={
            "held": _changelist("tasks_task", assignee__id__exact=agent.pk),
            "queue": _changelist(
                "tasks_task", queued_for__id__exact=agent.pk, status__exact=TaskStatus.QUEUED
            ),
            # By the agent's row, not a search of its handle: another organization's agent
            # (or a title naming it) matched that too.
            "acts": _changelist("tasks_taskevent", actor_agent__id__exact=agent.pk),
            "runs": _changelist("runtime_run", agent__id__exact=agent.pk),
            "usage": _changelist("costs_usagerecord", agent__id__exact=agent.pk),
        },
    )
    state.warnings = warnings_for(agent, state, now)
    return state


def warnings_for(agent: Agent, state: AgentState, now) -> list[Warning]:
    """What a manager should act on: the agent offline with work, its senior offline, a budget
    holding it, its webhook failing, no room left."""
    found: list[Warning] = []
    if agent.is_paused:
        reports = Agent.objects.filter(senior=agent).count()
        if reports or state.queue_total:
            found.append(
                Warning(
                    "danger",
                    f"{agent.name} is offline (paused) but {reports} agent(s) report to it and "
                    f"{state.queue_total} task(s) wait in its queue.",
                )
            )
        else:
            found.append(Warning("warn", f"{agent.name} is offline (paused): it receives nothing."))
    senior = agent.senior if agent.senior_id else None
    if senior is not None and senior.is_paused:
        found.append(
            Warning(
                "danger",
                f"Its senior, {senior.name} ({senior.handle}), is offline: its escalations go past "
                "them (to the default supervisor, or to humans).",
                reverse("admin:organization_agent_change", args=[senior.pk]),
                f"Open {senior.name}",
            )
        )
    budget = blocking_budget(agent)
    if budget is not None:
        found.append(
            Warning(
                "danger",
                f"Paused for budget: the {human(budget.scope).lower()} budget “{budget.subject}” is "
                f"exhausted ({money(budget.spent_usd)} of {money(budget.limit_usd)}); no managed run "
                "starts for it until the limit is raised or the month turns.",
                reverse("admin:costs_budget_change", args=[budget.pk]),
                "Open the budget",
            )
        )
    failed = WebhookDelivery.objects.filter(
        agent=agent, status=DeliveryStatus.FAILED, created_at__gte=now - WEBHOOK_WINDOW
    ).aggregate(n=Count("pk"), last=Max("created_at"))
    if failed["n"]:
        found.append(
            Warning(
                "danger",
                f"Its webhook fails: {failed['n']} delivery(ies) failed for good in the last 7 days.",
                _changelist(
                    "tasks_webhookdelivery",
                    agent__id__exact=agent.pk,
                    status__exact=DeliveryStatus.FAILED,
                ),
                "See the deliveries",
            )
        )
    if not agent.is_paused and state.workload >= state.capacity:
        found.append(
            Warning(
                "warn", f"At capacity ({state.workload}/{state.capacity}): new work for it queues."
            )
        )
    return found
