"""Writes of the costs app other than the metering itself: an outside agent's usage report."""

from decimal import Decimal

from django.conf import settings

from infrastructure.errors import Invalid
from organization.caller import Caller
from tasks.selectors import task_for

from .metering import Meter, task_ancestry
from .models import UsagePurpose, UsageRecord
from .money import usd
from .pricing import price_of
from .reports import book_reported


def usage_report(
    *,
    caller: Caller,
    provider: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    task: int | None = None,
    cost_usd: Decimal | None = None,
) -> UsageRecord:
    """`POST /api/usage` / `report_usage`: the key's agent reports a call it made itself; the task
    must be one it can see (else 404). One call at most USAGE_REPORT_MAX_COST_USD (400 `invalid`),
    never exhausting a budget other than its own (409 `report_exceeds_budget`)."""
    agent = caller.require_agent()
    task_id = task_for(caller, task).pk if task is not None else None
    provider, model = provider.strip().lower(), model.strip()
    price = price_of(provider, model)
    cost = price.cost(prompt_tokens, completion_tokens) if price.known else cost_usd
    if cost is not None and cost > settings.USAGE_REPORT_MAX_COST_USD:
        raise Invalid(
            f"This call costs {usd(cost)} as reported; a self-reported call may cost at most "
            f"{usd(settings.USAGE_REPORT_MAX_COST_USD)} here (USAGE_REPORT_MAX_COST_USD): report "
            "each call on its own."
        )
    meter = Meter.for_agent(
        agent, UsagePurpose.REPORTED, task_id=task_id, task_tree=task_ancestry(task_id)
    )
    return book_reported(
        meter,
        provider,
        model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
        spare_others=True,
    )
