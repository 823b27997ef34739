"""Which managed agents a budget holds back, for many agents at once (a page, a ranking): the
judgement of `budgets.holds_back`, in one query, in words (`hold_reason`), and as SQL for a count
over tasks (`held_agents_condition`).
"""

from __future__ import annotations

from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from organization.models import Agent, AgentRuntime

from .budgets import holds_back
from .models import MONTHLY_SCOPES, Budget, BudgetScope
from .money import usd
from .periods import current_period


def _covering(agents: list[Agent]) -> Q:
    """The monthly budgets a run of any of `agents` is metered against (`Meter.covering`)."""
    teams = {a.team_id for a in agents if a.team_id}
    return (
        Q(scope=BudgetScope.ORGANIZATION)
        | Q(scope=BudgetScope.TEAM, team_id__in=teams)
        | Q(scope=BudgetScope.AGENT, agent_id__in=[a.pk for a in agents])
    )


def _covers(budget: Budget, agent: Agent) -> bool:
    if budget.scope == BudgetScope.TEAM:
        return agent.team_id is not None and budget.team_id == agent.team_id
    if budget.scope == BudgetScope.AGENT:
        return budget.agent_id == agent.pk
    return True


def holding_budgets(agents: list[Agent], now=None) -> dict[int, Budget]:
    """For each managed agent of `agents` (one organization's) that a budget holds back, that
    budget, as `blocking_budget` picks it: one query, none for no managed agent."""
    managed = [a for a in agents if a.is_managed]
    if not managed:
        return {}
    budgets = [
        b
        for b in Budget.objects.filter(organization_id=managed[0].organization_id)
        .filter(_covering(managed))
        .select_related("team", "agent", "organization")
        .order_by("pk")
        if holds_back(b, now)
    ]
    found = {}
    for agent in managed:
        budget = next((b for b in budgets if _covers(b, agent)), None)
        if budget is not None:
            found[agent.pk] = budget
    return found


def hold_reason(budget: Budget) -> str:
    """Why the budget holds its agents back, in words."""
    return (
        f"the {budget.get_scope_display().lower()} budget “{budget.subject}” has no room this "
        f"month: {usd(budget.spent_usd)} spent of {usd(budget.limit_usd)}"
    )


def hold_reasons(agents: list[Agent]) -> dict[int, str]:
    """`holding_budgets` in words: the hook `tasks.holds.register_budget_holds` takes."""
    return {pk: hold_reason(b) for pk, b in holding_budgets(agents).items()}


def held_agents_condition(agent_field: str, now=None) -> Q:
    """SQL for "the managed agent in `agent_field` (of the outer query) is held for budget":
    `holds_back` over the budgets `blocking_budget` reads."""
    period = current_period(now or timezone.now())
    agent = OuterRef(agent_field)
    holding = (
        Budget.objects.filter(
            organization_id=OuterRef(f"{agent_field}__organization_id"), scope__in=MONTHLY_SCOPES
        )
        .filter(
            # What it has spent this period reaches its limit (a budget last written in an earlier
            # month has spent nothing yet), or it refused a call this period.
            Q(period=period, spent_usd__gte=F("limit_usd"))
            | (~Q(period=period) & Q(limit_usd__lte=0))
            | Q(refused_period=period)
        )
        .filter(
            Q(scope=BudgetScope.ORGANIZATION)
            | Q(scope=BudgetScope.TEAM, team_id=OuterRef(f"{agent_field}__team_id"))
            | Q(scope=BudgetScope.AGENT, agent_id=agent)
        )
    )
    return Q(**{f"{agent_field}__runtime": AgentRuntime.MANAGED}) & Q(Exists(holding))
