"""Budgets: set one (the admin and `POST /api/budgets`), read its state, find what blocks an agent.
A change that makes room sends `budget_made_room` after the commit (the runtime wakes the agents
that waited); creating, lowering or setting one again wakes nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import partial

from django.db import transaction
from django.db.models import Q, Sum
from django.dispatch import Signal
from django.utils import timezone

from infrastructure.errors import Invalid, NotFound
from organization.caller import Caller
from organization.models import Agent, Organization, Team
from tasks.models import Task

from . import sql
from .metering import BudgetExhausted, Meter, worst_case_usd
from .models import (
    MONEY_MAX,
    MONTHLY_SCOPES,
    WARNING_SHARE,
    ZERO,
    Budget,
    BudgetScope,
    BudgetState,
    UsageRecord,
    UsageState,
)
from .periods import current_period, period_of, roll
from .pricing import price_of
from .selectors import cost_of_task_tree

# Sent after the commit of a change that released agents a budget held back: kwargs
# organization_id, and team_id or agent_id when only that team's or agent's budget released them.
budget_made_room = Signal()


def state_of(budget: Budget, now=None) -> str:
    """`exhausted` only for money spent (or a call marked it, `holds_back`); what calls under way
    hold counts towards `warning` (they may settle for far less)."""
    period = period_of(budget, now)
    spent = budget.spent_usd if budget.period == period else ZERO
    if holds_back(budget, now):
        return BudgetState.EXHAUSTED
    if spent + budget.reserved_usd >= budget.limit_usd * WARNING_SHARE:
        return BudgetState.WARNING
    return BudgetState.OK


def holds_back(budget: Budget, now=None) -> bool:
    """Whether the budget holds a managed agent's runs back: what it has *spent* this period reaches
    its limit, or a call did not fit it this period. Money held by calls under way does not count
    (nothing would wake the agents when such a call settles for less)."""
    period = period_of(budget, now)
    spent = budget.spent_usd if budget.period == period else ZERO
    return spent >= budget.limit_usd or budget.refused_period == period


def current_view(budget: Budget, now=None) -> Budget:
    """The budget as of now: a monthly one seen in a new month has spent nothing yet."""
    roll(budget, now)
    return budget


def spent_so_far(budget: Budget, now=None) -> Decimal:
    """What the ledger already holds for a new budget's scope and period (it starts from it),
    up to what its counter holds (MONEY_MAX: exhausted whatever its limit)."""
    if budget.scope == BudgetScope.TASK:
        return min(cost_of_task_tree(budget.task), MONEY_MAX)
    rows = UsageRecord.objects.filter(organization_id=budget.organization_id).exclude(
        state=UsageState.RESERVED
    )
    if budget.is_monthly:
        start = (now or timezone.now()).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        rows = rows.filter(created_at__gte=start)
    if budget.scope == BudgetScope.TEAM:
        rows = rows.filter(team_id=budget.team_id)
    elif budget.scope == BudgetScope.AGENT:
        rows = rows.filter(agent_id=budget.agent_id)
    elif budget.scope == BudgetScope.COLLABORATION:
        rows = rows.filter(session_id=budget.session_id)
    return min(rows.aggregate(total=Sum("cost_usd"))["total"] or ZERO, MONEY_MAX)


def parse_usd(value, name: str) -> Decimal:
    """An amount of USD as a request gives it (a string or a number, never a bool), to the
    ledger's 9 decimal places; 400 `invalid` naming the field otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise Invalid(f'{name}: must be a decimal amount of USD, e.g. "50.00".')
    try:
        limit = Decimal(str(value))
    except ArithmeticError:
        limit = None
    # The bound is checked again once rounded: 9999999999.9999999999 rounds up to 10**10,
    # which the ledger's columns cannot hold.
    if limit is not None and limit.is_finite() and 0 <= limit < Decimal(10) ** 10:
        limit = limit.quantize(Decimal("0.000000001"))
        if limit < Decimal(10) ** 10:
            return limit
    raise Invalid(f'{name}: must be a decimal amount of USD from 0, e.g. "50.00".')


@transaction.atomic
def budget_set(
    *,
    caller: Caller,
    scope: str,
    limit_usd,
    team: str | None = None,
    agent: str | None = None,
    task: int | None = None,
    session=None,
) -> tuple[Budget, bool]:
    """Create the scope's budget or change its limit; returns (budget, created). Humans only."""
    caller.require_human()
    org = caller.organization
    if scope not in BudgetScope.values:
        raise Invalid(f"scope: must be one of {', '.join(BudgetScope.values)}.")
    limit = parse_usd(limit_usd, "monthly_limit_usd" if scope in MONTHLY_SCOPES else "limit_usd")
    subject = {"scope": scope}
    if scope == BudgetScope.TEAM:
        if not team:
            raise Invalid("team: required for a team budget (the team's name).")
        found = Team.objects.filter(organization=org, name=team).first()
        if found is None:
            raise NotFound(f"Team not found: {team}", "team_not_found")
        subject["team"] = found
    elif scope == BudgetScope.AGENT:
        if not agent:
            raise Invalid("agent: required for an agent budget (the agent's handle).")
        found = Agent.objects.filter(organization=org, handle=agent).first()
        if found is None:
            raise NotFound(f"Agent not found: {agent}", "agent_not_found")
        subject["agent"] = found
    elif scope == BudgetScope.TASK:
        # Like a team or agent budget: no subject is bad input (400), an unknown one absent (404).
        if task is None:
            raise Invalid("task: required for a task budget (the root task's id).")
        found = Task.objects.filter(organization=org, pk=task).first()
        if found is None:
            raise NotFound(f"Task not found: {task}", "task_not_found")
        subject["task"] = found
    elif scope == BudgetScope.COLLABORATION:
        if session is None:
            raise Invalid("A collaboration's budget is its max_cost_usd, set when it starts.")
        subject["session"] = session
    Organization.objects.select_for_update().filter(pk=org.pk).first()  # one create at a time
    budget = Budget.objects.select_for_update().filter(organization=org, **subject).first()
    created = budget is None
    if created:
        budget = Budget(organization=org, limit_usd=limit, created_by=caller.label, **subject)
        budget.period = period_of(budget)
        budget.spent_usd = spent_so_far(budget)
        budget.save()
        return budget, created
    roll(budget)
    held_back = holds_back(budget)
    if limit > budget.limit_usd:
        # Raised: a call refused at the old limit may fit now, and the alerts watch the new one.
        budget.refused_period = budget.warned_period = budget.exhausted_period = ""
    budget.limit_usd = limit
    budget.save(
        update_fields=[
            "limit_usd",
            "refused_period",
            "warned_period",
            "exhausted_period",
            "period",
            "spent_usd",
            "updated_at",
        ]
    )
    if budget.is_monthly and held_back and not holds_back(budget):
        _made_room(budget)
    return budget, created


def _made_room(budget: Budget) -> None:
    """Once the change commits, wake the managed agents the budget covers whose work waited."""
    transaction.on_commit(
        partial(
            budget_made_room.send_robust,
            sender=Budget,
            organization_id=budget.organization_id,
            team_id=budget.team_id,
            agent_id=budget.agent_id,
        ),
        robust=True,
    )


@transaction.atomic
def budget_delete(*, caller: Caller, budget: Budget) -> None:
    """Remove a budget; the agents it held back are woken (those another budget holds stay)."""
    caller.require_human()
    if budget.is_monthly and holds_back(current_view(budget)):
        _made_room(budget)
    budget.delete()


def blocking_budget(agent: Agent, now=None) -> Budget | None:
    """The first monthly budget covering the agent (its organization, team, own) that holds
    it back (`holds_back`: spent, or refused a call this period): a managed run for it would
    be refused at its first call, so none starts."""
    if not sql.has_any_budget(agent.organization_id):
        return None  # most organizations set none: one statement compiled once, not the search
    meter = Meter.for_agent(agent, purpose="run")
    for budget in Budget.objects.filter(meter.covering()).order_by("pk"):
        if holds_back(budget, now):
            return budget
    return None


def new_month_wake() -> int:
    """A new month (the sweep, on beat): monthly budgets that ran out or refused a call in an
    earlier month have room again: tell their organizations, once (their old marks are cleared,
    which changes nothing else: a mark only counts in its own period). Returns how many."""
    period = current_period()
    stale = Budget.objects.filter(scope__in=MONTHLY_SCOPES).filter(
        (Q(refused_period__lt=period) & ~Q(refused_period=""))
        | (Q(exhausted_period__lt=period) & ~Q(exhausted_period=""))
    )
    with transaction.atomic():
        # Locked in id order, as every writer of budgets locks them (costs/sql.py): one UPDATE
        # would lock them in the table's order, and deadlock with a call marking two.
        rows = list(stale.order_by("pk").select_for_update().values_list("pk", "organization_id"))
        Budget.objects.filter(pk__in=[pk for pk, _ in rows]).update(
            refused_period="", exhausted_period=""
        )
    organization_ids = {organization_id for _, organization_id in rows}
    for organization_id in organization_ids:
        budget_made_room.send_robust(sender=Budget, organization_id=organization_id)
    return len(organization_ids)


@dataclass
class Planned:
    """A model call a caller plans to make, for an estimate."""

    meter: Meter
    provider: str
    model: str
    prompt_bound: int
    max_tokens: int


HIDDEN_SUBJECT = "a budget that does not cover your own calls"


def fit(
    organization_id: int,
    calls: list[Planned],
    extra_limit: Decimal | None = None,
    viewer: Agent | None = None,
) -> dict:
    """What `calls` could cost at worst against each budget covering one of them (and
    `extra_limit`, a collaboration's own max_cost_usd); unpriced calls count 0 and are named.
    An agent `viewer` sees only whether the calls fit a budget it may not read."""
    total, tokens, unpriced = ZERO, 0, set()
    per_budget: dict[int, Decimal] = {}
    budgets: dict[int, Budget] = {}
    for call in calls:
        worst = worst_case_usd(
            price_of(call.provider, call.model), call.prompt_bound, call.max_tokens
        )
        tokens += call.prompt_bound + call.max_tokens
        if worst is None:
            unpriced.add(f"{call.provider}/{call.model}")
            continue
        total += worst
        for budget in Budget.objects.filter(call.meter.covering()).select_related("team", "agent"):
            budgets.setdefault(budget.pk, current_view(budget))
            per_budget[budget.pk] = per_budget.get(budget.pk, ZERO) + worst
    readable = set(budgets)
    if viewer is not None and budgets:
        own = Budget.objects.filter(Meter.for_agent(viewer, "run").covering(), pk__in=budgets)
        readable = set(own.values_list("pk", flat=True))
    rows = []
    for pk, amount in sorted(per_budget.items()):
        row = {
            "id": pk,
            "scope": budgets[pk].scope,
            "subject": budgets[pk].subject,
            "estimated_cost_usd": amount,
            "remaining_usd": max(budgets[pk].remaining_usd, ZERO),
            "fits": amount <= budgets[pk].remaining_usd,
        }
        if pk not in readable:
            row.update(id=None, subject=HIDDEN_SUBJECT, remaining_usd=None)
        rows.append(row)
    if extra_limit is not None:
        rows.append(
            {
                "id": None,
                "scope": BudgetScope.COLLABORATION,
                "subject": "max_cost_usd",
                "estimated_cost_usd": total,
                "remaining_usd": extra_limit,
                "fits": total <= extra_limit,
            }
        )
    return {
        "estimated_cost_usd": total,
        "estimated_tokens": tokens,
        "unpriced_models": sorted(unpriced),
        "budgets": rows,
    }


def refusal_seen_by(viewer: Agent | None, refusal: BudgetExhausted) -> str:
    """A call's refusal as `viewer` (an agent; None: a human) may read it: a budget not covering
    the viewer's own calls (as in `fit`) is neither named nor figured."""
    budget = refusal.budget
    if viewer is None or budget is None:
        return refusal.message
    own = Budget.objects.filter(Meter.for_agent(viewer, "run").covering(), pk=budget.pk)
    if own.exists():
        return refusal.message
    return f"A call of this session did not fit {HIDDEN_SUBJECT} (a {budget.scope} budget)."


def check_fits(estimate: dict) -> None:
    """409 `budget_exhausted` naming the first budget the estimate does not fit."""
    for row in estimate["budgets"]:
        if not row["fits"] and row["remaining_usd"] is None:
            raise BudgetExhausted(
                f"This collaboration could cost up to ${row['estimated_cost_usd']:.6f}, more "
                f"than {HIDDEN_SUBJECT} (a {row['scope']} budget) has left."
            )
        if not row["fits"]:
            raise BudgetExhausted(
                f"This collaboration could cost up to ${row['estimated_cost_usd']:.6f}; the "
                f"{row['scope']} budget of {row['subject']} has ${row['remaining_usd']:.6f} "
                "left. POST /api/collaborations/estimate shows every budget."
            )
