"""Budget alerts: one inbox item for the organization's humans when a budget crosses 80 % and
one when it is exhausted, per period (the unique constraint keeps it one under races)."""

from __future__ import annotations

from decimal import Decimal

from django.dispatch import Signal

from .models import LIFETIME, WARNING_SHARE, AlertKind, Budget, BudgetAlert

# Sent after an alert row is written (inside the spending transaction): receivers may notify.
budget_alert_raised = Signal()  # kwargs: alert


def _period_words(period: str) -> str:
    return "for its whole life" if period == LIFETIME else f"in {period}"


def _raise(budget: Budget, kind: str, period: str, message: str) -> None:
    created = BudgetAlert.objects.bulk_create(
        [BudgetAlert(organization_id=budget.organization_id, budget=budget, kind=kind,
                     period=period, message=message)],
        ignore_conflicts=True,
    )  # fmt: skip
    field = "warned_period" if kind == AlertKind.WARNING else "exhausted_period"
    if getattr(budget, field) != period:
        Budget.objects.filter(pk=budget.pk).update(**{field: period})
        setattr(budget, field, period)
        if created and created[0].pk:
            budget_alert_raised.send(sender=BudgetAlert, alert=created[0])


def raise_exhausted(budget: Budget, period: str) -> None:
    if budget.exhausted_period == period:
        return
    _raise(
        budget, AlertKind.EXHAUSTED, period,
        f"The {budget.scope} budget of {budget.subject} is exhausted {_period_words(period)}: "
        f"${budget.spent_usd:.2f} spent of ${budget.limit_usd:.2f}; new model calls it covers "
        "are refused until it is raised"
        + (" or the month ends." if period != LIFETIME else "."),
    )  # fmt: skip


def after_spending(budget: Budget, spent_before: Decimal, now) -> None:
    """Raise the alerts the spending just crossed into."""
    period, limit = budget.period, budget.limit_usd
    if budget.spent_usd >= limit > 0 or (limit == 0 and budget.spent_usd > 0):
        raise_exhausted(budget, period)
    elif budget.spent_usd >= limit * WARNING_SHARE and budget.warned_period != period:
        _raise(
            budget, AlertKind.WARNING, period,
            f"The {budget.scope} budget of {budget.subject} is at "
            f"{budget.spent_usd / limit:.0%} {_period_words(period)}: ${budget.spent_usd:.2f} "
            f"spent of ${budget.limit_usd:.2f}.",
        )  # fmt: skip
