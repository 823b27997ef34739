"""Budget periods: a monthly budget counts its calendar month, the others their lifetime."""

from __future__ import annotations

from django.utils import timezone

from .models import LIFETIME, ZERO, Budget


def current_period(now=None) -> str:
    return (now or timezone.now()).strftime("%Y-%m")


def period_of(budget: Budget, now=None) -> str:
    return current_period(now) if budget.is_monthly else LIFETIME


def roll(budget: Budget, now=None) -> bool:
    """A monthly budget's counters move to the current month (what is held stays held)."""
    period = period_of(budget, now)
    if budget.period == period:
        return False
    budget.period, budget.spent_usd = period, ZERO
    return True
