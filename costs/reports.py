"""An outside agent's own report of a model call: priced like ours, booked on its budgets."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from infrastructure.errors import Conflict
from infrastructure.prepared import insert_new

from .metering import Meter, bounded_tokens, bounded_usd, ledger_row, spend
from .models import WARNING_SHARE, ZERO, Budget, BudgetScope, PriceSource, UsageRecord, UsageState
from .money import usd
from .periods import roll
from .pricing import price_of


class ReportRefused(Conflict):
    """409 `report_exceeds_budget`: a self-reported call would exhaust a budget that other
    agents' work depends on (a team's, the organization's, a task tree's)."""

    def __init__(self, message: str, budget: Budget):
        super().__init__(message, "report_exceeds_budget")
        self.budget = budget


def book_reported(
    meter: Meter,
    provider: str,
    model: str,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: Decimal | None = None,
    spare_others: bool = False,
) -> UsageRecord:
    """An outside agent's report of a call it made: priced like ours (its `cost_usd` only when we
    know no price), marked self-reported, booked on the covering budgets. `spare_others`: refused
    (ReportRefused) where it would exhaust a budget that is not the reporter's own."""
    price = price_of(provider, model)
    prompt_tokens = bounded_tokens(prompt_tokens, "prompt tokens")
    completion_tokens = bounded_tokens(completion_tokens, "completion tokens")
    cost = price.cost(prompt_tokens, completion_tokens)
    source = price.source
    if cost is None and cost_usd is not None:
        cost, source = cost_usd, PriceSource.REPORTED
    cost = bounded_usd(cost)
    rates = price.rates_for(prompt_tokens, completion_tokens) if price.known else (None, None)
    rates = (bounded_usd(rates[0]), bounded_usd(rates[1]))
    with transaction.atomic():
        budgets = list(Budget.objects.select_for_update().filter(meter.covering()).order_by("pk"))
        if spare_others and cost:
            _refuse_if_it_exhausts_others(budgets, meter, cost)
        record = insert_new(
            UsageRecord(
                **{**ledger_row(meter, provider, model, price), "price_source": source},
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=cost,
                input_usd_per_mtok=rates[0],
                output_usd_per_mtok=rates[1],
                self_reported=True,
                state=UsageState.RECORDED,
                budget_ids=[b.pk for b in budgets],
                settled_at=timezone.now(),
            )
        )
        spend(budgets, held=ZERO, cost=cost or ZERO)
    return record


def _refuse_if_it_exhausts_others(budgets: list[Budget], meter: Meter, cost: Decimal) -> None:
    """ReportRefused when `cost` would take a locked budget other than the reporter's own agent
    budget past its warning share: the last fifth of a shared budget is kept for the calls the
    service meters, so reports alone never leave colleagues' calls without room."""
    now = timezone.now()
    for budget in budgets:
        if budget.scope == BudgetScope.AGENT and budget.agent_id == meter.agent_id:
            continue
        roll(budget, now)
        if budget.spent_usd >= budget.limit_usd:
            continue  # spent out already: the report changes nothing for anyone
        room = budget.limit_usd * WARNING_SHARE - budget.spent_usd - budget.reserved_usd
        if cost <= room:
            continue
        raise ReportRefused(
            f"This report ({usd(cost)}) would take the {budget.scope} budget of "
            f"{budget.subject} past {WARNING_SHARE:.0%} of its {usd(budget.limit_usd)} "
            f"({usd(max(room, ZERO))} left for reported calls; the rest is kept for your "
            "colleagues' work): nothing was recorded. A human can raise the budget; then report "
            "the call again.",
            budget,
        )
