"""Writes of the costs app other than the metering itself: an outside agent's usage report."""

from decimal import Decimal

from organization.caller import Caller
from tasks.selectors import task_for

from .metering import Meter, book_reported, task_ancestry
from .models import UsagePurpose, UsageRecord


def usage_report(
    *, caller: Caller, provider: str, model: str, prompt_tokens: int, completion_tokens: int,
    task: int | None = None, cost_usd: Decimal | None = None,
) -> UsageRecord:  # fmt: skip
    """`POST /api/usage` / `report_usage`: the agent of the key reports a call it made itself;
    the task, if named, must be one it can see (404 otherwise, as everywhere)."""
    agent = caller.require_agent()
    task_id = task_for(caller, task).pk if task is not None else None
    meter = Meter.for_agent(
        agent, UsagePurpose.REPORTED, task_id=task_id, task_tree=task_ancestry(task_id)
    )
    return book_reported(
        meter, provider.strip().lower(), model.strip(), prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens, cost_usd=cost_usd,
    )  # fmt: skip
