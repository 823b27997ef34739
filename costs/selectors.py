"""Reads of the ledger and the budgets, scoped to the caller: an agent key sees its own usage and
costs, organization keys and admin members the whole organization's."""

from __future__ import annotations

from decimal import Context, Decimal

from django.db.models import Count, DecimalField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from organization.caller import Caller

from . import sql
from .metering import Meter
from .models import ZERO, Budget, BudgetAlert, UsageRecord

# The ledger's money columns: nine decimals.
LEDGER_PLACES = UsageRecord._meta.get_field("cost_usd").decimal_places
LEDGER_STEP = Decimal(1).scaleb(-LEDGER_PLACES)


def as_ledger_sum(total: Decimal) -> Decimal:
    """A sum of the ledger as its column reads, nine decimals, on every database: SQLite
    (`make run`) sums its decimals as floats, which the ORM reads back to 15 significant digits
    (0.003 as 0.00300000000000000). As many digits as the sum has (no column caps a sum)."""
    digits = max(total.adjusted(), 0) + 2 + LEDGER_PLACES
    return total.quantize(LEDGER_STEP, context=Context(digits))


MONEY_ZERO = Value(ZERO, output_field=DecimalField(max_digits=19, decimal_places=9))

# group_by → the ledger column a row's `key` is, and how it reads.
GROUPS = {
    "agent": "agent__handle",
    "team": "team__name",
    "model": None,  # "<provider>/<model>"
    "day": "day",
    "purpose": "purpose",
}


def usage_of(*, caller: Caller) -> QuerySet[UsageRecord]:
    rows = UsageRecord.objects.filter(organization=caller.organization)
    if caller.agent is not None:
        rows = rows.filter(agent=caller.agent)
    return rows.select_related("agent", "team")


def cost_rows(*, caller: Caller, group_by: str, since=None, until=None) -> list[dict]:
    """`{key, prompt_tokens, completion_tokens, cost_usd, calls}` per group, costliest first."""
    rows = usage_of(caller=caller)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    if group_by == "day":
        rows = rows.annotate(day=TruncDate("created_at"))
    keys = ["provider", "model"] if group_by == "model" else [GROUPS[group_by]]
    grouped = (
        rows.values(*keys)
        .annotate(
            prompt=Coalesce(Sum("prompt_tokens"), 0),
            completion=Coalesce(Sum("completion_tokens"), 0),
            cost=Coalesce(Sum("cost_usd"), MONEY_ZERO),
            calls=Count("pk"),
        )
        .order_by(*keys)
    )
    result = []
    for row in grouped:
        if group_by == "model":
            key = f"{row['provider']}/{row['model']}"
        else:
            key = row[keys[0]]
            key = key.isoformat() if hasattr(key, "isoformat") else key
        result.append(
            {
                "key": key,
                "prompt_tokens": row["prompt"],
                "completion_tokens": row["completion"],
                "cost_usd": row["cost"],
                "calls": row["calls"],
            }
        )
    if group_by != "day":
        result.sort(key=lambda r: (-r["cost_usd"], str(r["key"])))
    return result


def cost_subquery(field: str, outer: str = "pk"):
    """An annotation: what the ledger's rows whose `field` is the outer row's `outer` cost
    (e.g. `Run.objects.annotate(cost_usd=cost_subquery("run"))`): one subquery, no N+1."""
    spent = (
        UsageRecord.objects.filter(**{field: OuterRef(outer)})
        .order_by()
        .values(field)
        .annotate(total=Sum("cost_usd"))
        .values("total")
    )
    return Coalesce(Subquery(spent), MONEY_ZERO)


def total_cost(**filters) -> Decimal:
    """The ledger's cost of the rows matching `filters`: a call under way counts once it has
    returned (its reservation has no cost yet), a hold its worker never settled at its worst case."""
    totals = UsageRecord.objects.filter(**filters).aggregate(
        spent=Coalesce(Sum("cost_usd"), MONEY_ZERO)
    )
    return as_ledger_sum(totals["spent"])


def cost_of_session(session_id) -> Decimal:
    return total_cost(session_id=session_id)


def budgets_of(*, caller: Caller) -> QuerySet[Budget]:
    """A human: the organization's budgets; an agent: those that cover its own calls."""
    budgets = Budget.objects.filter(organization=caller.organization)
    if caller.agent is not None:
        budgets = budgets.filter(Meter.for_agent(caller.agent, "run").covering())
    return budgets.select_related("team", "agent", "organization").order_by("scope", "pk")


def alerts_of(*, caller: Caller | None) -> QuerySet[BudgetAlert]:
    if caller is None:
        return BudgetAlert.objects.none()
    return (
        BudgetAlert.objects.filter(organization=caller.organization)
        .select_related("budget__organization", "budget__team", "budget__agent")
        .order_by("-created_at", "-pk")
    )


def cost_of_task_tree(task) -> Decimal:
    """The task's and all its subtasks' model calls, in one statement (a recursive CTE for the
    tree), read as the ledger's column (`as_ledger_sum`)."""
    total = sql.task_tree_cost(task.pk)
    return ZERO if total is None else as_ledger_sum(total)


# --- the dashboard's figures (console.metrics) -------------------------------------------


def start_of_day():
    return timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)


def start_of_month():
    return start_of_day().replace(day=1)


def cost_since(organization, since) -> Decimal:
    return total_cost(organization=organization, created_at__gte=since)


def unread_alert_count(organization) -> int:
    return BudgetAlert.objects.filter(organization=organization, read_at__isnull=True).count()


def top_spenders(organization, since, limit: int = 5) -> list[dict]:
    rows = (
        UsageRecord.objects.filter(organization=organization, created_at__gte=since)
        .exclude(agent=None)
        .values("agent__handle", "agent__name")
        .annotate(cost=Coalesce(Sum("cost_usd"), MONEY_ZERO), calls=Count("pk"))
        .order_by("-cost", "agent__handle")[:limit]
    )
    return [
        {
            "handle": r["agent__handle"],
            "name": r["agent__name"],
            "cost_usd": r["cost"],
            "calls": r["calls"],
        }
        for r in rows
    ]
