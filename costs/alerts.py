"""Budget alerts: one inbox item for the organization's humans when a budget crosses 80 % and
one when it is exhausted, per period and limit (the unique constraint keeps it one under races;
raising a limit re-arms both, `budgets.budget_set`)."""

from __future__ import annotations

from functools import partial

from django.db import IntegrityError, transaction
from django.dispatch import Signal

from organization.models import Organization
from tasks.models import DeliveryStatus, WebhookDelivery
from tasks.webhooks import enqueue_deliveries

from .models import LIFETIME, WARNING_SHARE, AlertKind, Budget, BudgetAlert
from .money import usd

# Sent after the commit of a new alert: receivers may notify further.
budget_alert_raised = Signal()  # kwargs: alert


def _period_words(period: str) -> str:
    return "for its whole life" if period == LIFETIME else f"in {period}"


def _raise(budget: Budget, kind: str, period: str, message: str) -> None:
    field = "warned_period" if kind == AlertKind.WARNING else "exhausted_period"
    try:
        with transaction.atomic():
            # The budget's row first, then the alert's unique key: the order every path takes
            # them in (a refused call locks the row to mark `refused_period`, a settle locks it
            # to book the cost, and both then raise this alert). Inserting first would let a
            # settle hold the key while waiting for the row a refusal holds while waiting for
            # the key: a deadlock, and a lost reply or a 500 instead of a 409.
            Budget.objects.filter(pk=budget.pk).update(**{field: period})
            alert = BudgetAlert.objects.create(
                organization_id=budget.organization_id,
                budget=budget,
                kind=kind,
                period=period,
                limit_usd=budget.limit_usd,
                message=message,
            )
            _to_webhook(alert)
    except IntegrityError:
        return  # raised already in this period (by a concurrent call)
    finally:
        setattr(budget, field, period)
    transaction.on_commit(
        partial(budget_alert_raised.send_robust, sender=BudgetAlert, alert=alert), robust=True
    )


def alert_payload(alert: BudgetAlert) -> dict:
    budget = alert.budget
    return {
        "event": f"budget.{alert.kind}",
        "alert_id": alert.pk,
        "organization": alert.organization.slug,
        "budget": {
            "id": budget.pk,
            "scope": budget.scope,
            "subject": budget.subject,
            "limit_usd": str(budget.limit_usd),
            "spent_usd": str(budget.spent_usd),
            "period": alert.period,
        },
        "message": alert.message,
        "created_at": alert.created_at.isoformat(),
    }


def _to_webhook(alert: BudgetAlert) -> None:
    """The organization's webhook, if set: a signed delivery, retried like an agent's (sent
    through the outbox when the spending transaction commits)."""
    organization = Organization.objects.only("webhook_url", "slug").get(pk=alert.organization_id)
    if not organization.webhook_url:
        return
    alert.organization = organization
    delivery = WebhookDelivery.objects.create(
        organization=organization,
        agent=None,
        url=organization.webhook_url,
        payload=alert_payload(alert),
        status=DeliveryStatus.PENDING,
    )
    enqueue_deliveries([delivery.pk])


def raise_exhausted(budget: Budget, period: str) -> None:
    if budget.exhausted_period == period:
        return
    _raise(
        budget,
        AlertKind.EXHAUSTED,
        period,
        f"The {budget.scope} budget of {budget.subject} is "
        f"{'overspent' if budget.is_overspent else 'exhausted'} "
        f"{_period_words(period)}: {figures(budget)}; new model calls it covers are refused "
        "until it is raised" + (" or the month ends." if period != LIFETIME else "."),
    )


def figures(budget: Budget) -> str:
    """ "$1.14 spent of $1.00 ($0.14 over its limit)": what it has spent of its limit, and by how
    much it is past it (calls it could not refuse: reported after they were made, or under way
    when it was set)."""
    words = f"{usd(budget.spent_usd)} spent of {usd(budget.limit_usd)}"
    if budget.is_overspent:
        words += f" ({usd(budget.spent_usd - budget.limit_usd)} over its limit)"
    return words


def after_spending(budget: Budget) -> None:
    """Raise the alerts the spending just crossed into (each once per period)."""
    period, limit = budget.period, budget.limit_usd
    if budget.spent_usd >= limit > 0 or (limit == 0 and budget.spent_usd > 0):
        raise_exhausted(budget, period)
    elif 0 < limit * WARNING_SHARE <= budget.spent_usd and budget.warned_period != period:
        # (A $0 limit has no 80 %: nothing spent on it is nothing to warn of.)
        _raise(
            budget,
            AlertKind.WARNING,
            period,
            f"The {budget.scope} budget of {budget.subject} is at "
            f"{budget.spent_usd / limit:.0%} {_period_words(period)}: {figures(budget)}.",
        )
