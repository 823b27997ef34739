"""The monthly budgets of the organization, its teams and its agents, set through `budget_set`.

A task's or a collaboration's budget belongs to that work, which the file does not carry."""

from decimal import Decimal, InvalidOperation

from costs.budgets import budget_set
from costs.models import MONTHLY_SCOPES, Budget
from organization.models import Organization

from .base import Context, Entry


def usd(amount: Decimal) -> str:
    """An amount in its shortest exact form: "50", "0.25"."""
    return format(amount.normalize(), "f")


def export_budgets(org: Organization) -> list[dict]:
    budgets = Budget.objects.filter(organization=org, scope__in=MONTHLY_SCOPES)
    rows = []
    for budget in budgets.select_related("team", "agent"):
        row = {"scope": budget.scope}
        if budget.team_id:
            row["team"] = budget.team.name
        if budget.agent_id:
            row["agent"] = budget.agent.handle
        rows.append(row | {"limit_usd": usd(budget.limit_usd)})
    return sorted(rows, key=lambda row: (row["scope"], row.get("team", ""), row.get("agent", "")))


def budget_canonical(item: dict) -> dict:
    """The limit as the export writes it ("50.00" is "50"); a limit that is no amount is left
    for `budget_set` to refuse."""
    try:
        return item | {"limit_usd": usd(Decimal(item["limit_usd"]))}
    except (InvalidOperation, TypeError, ValueError):
        return item


def apply_budget(context: Context, entry: Entry) -> None:
    item = entry.item
    budget_set(
        caller=context.caller,
        scope=item["scope"],
        limit_usd=item["limit_usd"],
        team=item.get("team"),
        agent=item.get("agent"),
    )
