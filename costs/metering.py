"""Every model call through the ledger: `reserve` its worst case, make it, `settle` what it cost.

The covering budgets are locked in primary-key order and the check counts what is spent and what
is held, so the money spent never exceeds a budget; docs/costs.md tells the whole protocol.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Greatest, Least
from django.utils import timezone

from infrastructure.errors import Conflict
from infrastructure.prepared import insert_new

from . import alerts, sql
from .bounds import bounded_tokens, bounded_usd, worst_case_usd
from .models import (
    LIFETIME,
    MONEY_MAX,
    ZERO,
    Budget,
    BudgetScope,
    PriceSource,
    UsageRecord,
    UsageState,
)
from .money import usd
from .periods import current_period, period_of, roll
from .pricing import Price, price_of

log = logging.getLogger(__name__)

# A call too big for what a budget has left marks it exhausted for the period only once this
# share of it is spent: one call's worst case must not hold a month mostly unspent back.
REFUSAL_MARKS_FROM = Decimal("0.5")


class BudgetExhausted(Conflict):
    """409 `budget_exhausted`: the call (or the collaboration) does not fit a budget.
    `held_only`: it would fit what the budgets have not spent — only calls under way hold the
    money, and it fits once they settle (a managed run waits for that rather than fail)."""

    def __init__(self, message: str, budget: Budget | None = None, held_only: bool = False):
        super().__init__(message, "budget_exhausted")
        self.budget = budget
        self.held_only = held_only


@dataclass
class Meter:
    """Who makes a call and what it belongs to: the budgets that cover it follow from this."""

    organization_id: int
    purpose: str
    agent_id: int | None = None
    team_id: int | None = None
    session_id: object = None
    run_id: int | None = None
    task_id: int | None = None
    # The call's task and its ancestors: a task budget covers its whole tree.
    task_tree: tuple[int, ...] = ()
    # Who in a collaboration makes it (its agent key there).
    label: str = ""

    @classmethod
    def for_agent(cls, agent, purpose: str, **kwargs) -> Meter:
        if agent is None:
            return cls(purpose=purpose, **kwargs)
        kwargs.setdefault("organization_id", agent.organization_id)
        return cls(purpose=purpose, agent_id=agent.pk, team_id=agent.team_id, **kwargs)

    def covering(self) -> Q:
        """The budgets that cover this call."""
        q = Q(scope=BudgetScope.ORGANIZATION)
        if self.team_id:
            q |= Q(scope=BudgetScope.TEAM, team_id=self.team_id)
        if self.agent_id:
            q |= Q(scope=BudgetScope.AGENT, agent_id=self.agent_id)
        if self.task_tree:
            q |= Q(scope=BudgetScope.TASK, task_id__in=self.task_tree)
        if self.session_id:
            q |= Q(scope=BudgetScope.COLLABORATION, session_id=self.session_id)
        return Q(organization_id=self.organization_id) & q


@dataclass
class Ticket:
    """A call between `reserve` and `settle`."""

    meter: Meter
    provider: str
    model: str
    price: Price
    worst_usd: Decimal | None
    record_id: int | None = None  # the reservation's ledger row, if budgets cover the call
    budget_ids: list[int] = field(default_factory=list)


def task_ancestry(task_id: int | None) -> tuple[int, ...]:
    """The task and its parents up to the root (a task budget covers its whole tree); read at
    every managed run's start, one compiled statement a level."""
    chain: list[int] = []
    while task_id is not None and task_id not in chain and len(chain) < 100:
        chain.append(task_id)
        task_id = sql.parent_of(task_id)
    return tuple(chain)


# (provider, model, organization) of unpriced calls this process has checked against budgets.
_UNPRICED_CHECKED: set[tuple[str, str, int]] = set()


def reserve(
    meter: Meter,
    provider: str,
    model: str,
    *,
    prompt_bound: int,
    max_tokens: int,
    deadline: float | None = None,
) -> Ticket:
    """Hold the call's worst case against every budget covering it, or raise BudgetExhausted."""
    price = price_of(provider, model)
    worst = worst_case_usd(price, prompt_bound, max_tokens)
    ticket = Ticket(meter, provider, model, price, worst)
    if price.source == PriceSource.FREE:
        return ticket
    if worst is None:
        # No price: nothing can be held, so nothing is locked. The call goes ahead, recorded
        # with a null cost and flagged in the admin; an operator prices the model with
        # LLM_PRICES. Whether budgets cover it is read (and warned about) once per process.
        unpriced = (provider, model, meter.organization_id)
        if unpriced not in _UNPRICED_CHECKED:
            _UNPRICED_CHECKED.add(unpriced)
            if Budget.objects.filter(meter.covering()).exists():
                log.warning(
                    "no price for %s/%s: budgets cannot hold its cost (set LLM_PRICES); "
                    "said once per process",
                    provider,
                    model,
                )
        return ticket
    if _in_one_statement():
        return _reserve_in_one_statement(ticket, deadline)
    refused: list[Budget] = []
    with transaction.atomic():
        sql.commit_without_waiting_for_disk()
        budgets = list(Budget.objects.select_for_update().filter(meter.covering()).order_by("pk"))
        if not budgets:
            return ticket
        now = timezone.now()
        for budget in budgets:
            if roll(budget, now):
                budget.save(update_fields=["period", "spent_usd", "updated_at"])
        refused = [b for b in budgets if b.remaining_usd < worst]
        if not refused:
            Budget.objects.filter(pk__in=[b.pk for b in budgets]).update(
                reserved_usd=F("reserved_usd") + worst
            )
            seconds_left = (deadline - time.monotonic()) if deadline else 0
            ticket.record_id = insert_new(
                UsageRecord(
                    **ledger_row(meter, provider, model, price),
                    state=UsageState.RESERVED,
                    reserved_usd=worst,
                    budget_ids=[b.pk for b in budgets],
                    expires_at=now
                    + timedelta(seconds=max(seconds_left, 0) + settings.COSTS_RESERVATION_GRACE),
                )
            ).pk
            ticket.budget_ids = [b.pk for b in budgets]
            return ticket
        _mark_refused(refused, worst, now)
    raise _refusal(refused, worst, provider, model)


def _mark_refused(refused: list[Budget], worst: Decimal, now) -> None:
    """Mark each budget that refused a call as exhausted for this period, with its alert: only
    where what it has *spent* leaves no room and is at least half its limit (held money, or one
    call too big for a mostly unspent budget, holds nobody back)."""
    for budget in refused:
        if budget.limit_usd - budget.spent_usd >= worst:
            continue
        if budget.spent_usd < budget.limit_usd * REFUSAL_MARKS_FROM:
            continue
        period = period_of(budget, now)
        if budget.refused_period != period:
            Budget.objects.filter(pk=budget.pk).update(refused_period=period)
        alerts.raise_exhausted(budget, period)


def _refusal(refused: list[Budget], worst: Decimal, provider: str, model: str) -> BudgetExhausted:
    """The refusal, naming the first budget the call does not fit; `held_only` when it would fit
    every one of them once the calls under way settle."""
    held_only = all(b.limit_usd - b.spent_usd >= worst for b in refused)
    budget = next((b for b in refused if b.limit_usd - b.spent_usd < worst), refused[0])
    left = max(budget.remaining_usd, ZERO)
    held = (
        f", {usd(budget.reserved_usd)} more held by calls under way" if budget.reserved_usd else ""
    )
    return BudgetExhausted(
        f"The {budget.scope} budget of {budget.subject} ({usd(budget.limit_usd)}"
        f"{' a month' if budget.is_monthly else ''}) has {usd(left)} left{held}; this call "
        f"could cost up to {usd(worst)} ({provider}/{model}).",
        budget,
        held_only=held_only,
    )


# --- PostgreSQL: the same two steps in one statement each (costs/sql.py) ------------------

# Off: the ORM path on PostgreSQL too (the tests run both).
ONE_STATEMENT = True


def _in_one_statement() -> bool:
    return ONE_STATEMENT and sql.may_run_alone()


def _reserve_in_one_statement(ticket: Ticket, deadline: float | None) -> Ticket:
    meter, now = ticket.meter, timezone.now()
    seconds_left = (deadline - time.monotonic()) if deadline else 0
    locked, short, record_id = sql.reserve(
        {
            **_covering_params(meter),
            "run": meter.run_id,
            "task": meter.task_id,
            "purpose": meter.purpose,
            "label": meter.label,
            "provider": ticket.provider,
            "model": ticket.model,
            "price_source": ticket.price.source,
            "worst": ticket.worst_usd,
            "period": current_period(now),
            "expires_in": max(seconds_left, 0) + settings.COSTS_RESERVATION_GRACE,
        }
    )
    if record_id is not None:
        ticket.record_id, ticket.budget_ids = record_id, locked
        return ticket
    if not short:
        return ticket  # no budget covers the call
    refused = list(Budget.objects.filter(pk__in=short).order_by("pk"))
    for budget in refused:
        roll(budget, now)
    with transaction.atomic():
        _mark_refused(refused, ticket.worst_usd, now)
    raise _refusal(refused, ticket.worst_usd, ticket.provider, ticket.model)


def _covering_params(meter: Meter) -> dict:
    """The parameters of `sql.COVERING` (the budgets covering the meter's call)."""
    return {
        "org": meter.organization_id,
        "team": meter.team_id,
        "agent": meter.agent_id,
        "tasks": list(meter.task_tree),
        "session": meter.session_id,
    }


def _settle_in_one_statement(ticket: Ticket, cost: Decimal | None, usage: dict) -> bool:
    """False: the reservation was not held any more (booked by the sweep, or lost)."""
    now = timezone.now()
    settled, budgets = sql.settle(
        {
            **{f: usage[f] for f in ("error",)},
            **_covering_params(ticket.meter),
            "budgets": ticket.budget_ids,
            "record": ticket.record_id,
            "prompt": usage["prompt_tokens"],
            "completion": usage["completion_tokens"],
            "cost": cost,
            "input_rate": usage["input_usd_per_mtok"],
            "output_rate": usage["output_usd_per_mtok"],
            "held": ticket.worst_usd,
            "booked": cost or ZERO,
            "period": current_period(now),
        }
    )
    if settled:
        for budget in budgets:
            alerts.after_spending(budget)
    return settled


def ledger_row(meter: Meter, provider: str, model: str, price: Price) -> dict:
    return {
        "organization_id": meter.organization_id,
        "agent_id": meter.agent_id,
        "team_id": meter.team_id,
        "purpose": meter.purpose,
        "session_id": meter.session_id,
        "run_id": meter.run_id,
        "task_id": meter.task_id,
        "label": meter.label,
        "provider": provider,
        "model": model,
        "price_source": price.source,
    }


def settle(
    ticket: Ticket, *, prompt_tokens: int = 0, completion_tokens: int = 0, error: str = ""
) -> UsageRecord | None:
    """Book what the call cost and release its hold (a failed call books what it reported)."""
    price = ticket.price
    prompt_tokens = bounded_tokens(prompt_tokens, "prompt tokens")
    completion_tokens = bounded_tokens(completion_tokens, "completion tokens")
    cost = bounded_usd(price.cost(prompt_tokens, completion_tokens))
    input_rate, output_rate = (
        price.rates_for(prompt_tokens, completion_tokens) if price.known else (None, None)
    )
    input_rate, output_rate = bounded_usd(input_rate), bounded_usd(output_rate)
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost,
        "input_usd_per_mtok": input_rate,
        "output_usd_per_mtok": output_rate,
        "error": error[:2000],
    }
    if ticket.record_id is None:
        return _book_unheld(ticket, price, usage, cost)
    if cost is not None and ticket.worst_usd is not None and cost > ticket.worst_usd:
        log.error(
            "%s/%s cost $%s, above its reserved worst case $%s",
            ticket.provider,
            ticket.model,
            cost,
            ticket.worst_usd,
        )
    if _in_one_statement() and _settle_in_one_statement(ticket, cost, usage):
        return None
    with transaction.atomic():
        sql.commit_without_waiting_for_disk()
        _book(
            ticket.record_id,
            ticket.budget_ids,
            ticket.worst_usd,
            cost or ZERO,
            usage,
            UsageState.RECORDED,
            ledger_row(ticket.meter, ticket.provider, ticket.model, price),
            covering=ticket.meter.covering(),
        )
    return None


def _book_unheld(ticket: Ticket, price: Price, usage: dict, cost: Decimal | None) -> UsageRecord:
    """A call no budget held (none covered it when it began): its row, and — when it cost
    something — the budgets covering it now, set while it ran, which would otherwise never see
    it (it was under way, so no reservation of theirs counted it either)."""
    record = UsageRecord(
        **ledger_row(ticket.meter, ticket.provider, ticket.model, price),
        **usage,
        state=UsageState.RECORDED,
        settled_at=timezone.now(),
    )
    if not cost or not sql.has_any_budget(ticket.meter.organization_id):
        return insert_new(record)  # one compiled read, not a transaction, for most calls
    with transaction.atomic():
        covering = Budget.objects.filter(ticket.meter.covering())
        budgets = list(covering.select_for_update().order_by("pk"))
        record.budget_ids = [b.pk for b in budgets]
        insert_new(record)
        if budgets:
            spend(budgets, held=ZERO, cost=cost)
    return record


def _book(
    record_id: int,
    budget_ids: list[int],
    held: Decimal,
    cost: Decimal,
    usage: dict,
    state: str,
    row: dict | None = None,
    covering: Q | None = None,
) -> bool:
    """Settle one reservation in the caller's transaction (False when it was settled before):
    the budgets locked in primary-key order, then changed in one statement; the cost is booked
    too on the budgets `covering` the call that were set while it ran."""
    which = Q(pk__in=budget_ids) | covering if covering is not None else Q(pk__in=budget_ids)
    budgets = list(Budget.objects.select_for_update().filter(which).order_by("pk"))
    settled = UsageRecord.objects.filter(pk=record_id, state=UsageState.RESERVED).update(
        state=state, settled_at=timezone.now(), **usage
    )
    if not settled:
        if row is None or UsageRecord.objects.filter(pk=record_id).exists():
            return False  # the sweep booked it at its worst case already
        # The reservation's commit was lost (its transaction commits asynchronously, see
        # `reserve`): book the call now, as one no budget held.
        held = ZERO
        UsageRecord.objects.create(
            pk=record_id,
            **row,
            **usage,
            state=state,
            budget_ids=budget_ids,
            settled_at=timezone.now(),
        )
    spend([b for b in budgets if b.pk in budget_ids], held=held, cost=cost)
    late = [b for b in budgets if b.pk not in budget_ids]
    if late:
        spend(late, held=ZERO, cost=cost)
    return True


def spend(budgets: list[Budget], *, held: Decimal, cost: Decimal) -> None:
    """Release `held` and book `cost` on the locked `budgets` in one statement, then raise the alerts
    the spending crossed into. What is spent saturates at MONEY_MAX rather than overflow its column
    (the ledger keeps the exact sum)."""
    now = timezone.now()
    period = current_period(now)
    same_period = Q(period=period) | Q(period=LIFETIME)
    cost = bounded_usd(cost)
    Budget.objects.filter(pk__in=[b.pk for b in budgets]).update(
        reserved_usd=Greatest(F("reserved_usd") - held, Value(ZERO)),
        spent_usd=Case(
            When(same_period, then=Least(F("spent_usd") + cost, Value(MONEY_MAX))),
            default=Value(cost),
        ),
        period=Case(When(period=LIFETIME, then=Value(LIFETIME)), default=Value(period)),
        updated_at=now,
    )
    for budget in budgets:
        spent_before = budget.spent_usd if not roll(budget, now) else ZERO
        budget.reserved_usd = max(budget.reserved_usd - held, ZERO)
        budget.spent_usd = min(spent_before + cost, MONEY_MAX)
        alerts.after_spending(budget)


# The fields of a Meter that its call's UsageRecord keeps (the task tree follows from its task).
RECORDED_METER = ("organization_id", "purpose", "agent_id", "team_id", "session_id", "task_id")


def sweep_expired(now=None) -> int:
    """Book each reservation past its expiry at its worst case; returns how many."""
    now = now or timezone.now()
    expired = UsageRecord.objects.filter(state=UsageState.RESERVED, expires_at__lt=now).only(
        "pk", "budget_ids", "reserved_usd", *RECORDED_METER
    )[:500]
    booked = 0
    for record in list(expired):
        # The call's meter again, for the budgets set while it was under way (see `_book`).
        meter = Meter(
            task_tree=task_ancestry(record.task_id),
            **{name: getattr(record, name) for name in RECORDED_METER},
        )
        held = record.reserved_usd
        with transaction.atomic():
            booked += _book(
                record.pk,
                record.budget_ids,
                held,
                held,
                {
                    "cost_usd": held,
                    "error": "its worker never settled it: booked at its worst case",
                },
                UsageState.EXPIRED,
                covering=meter.covering(),
            )
    return booked
