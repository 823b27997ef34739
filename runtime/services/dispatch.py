"""Queue a run: a new one for waiting triggers, or one sent again, at its agent's priority.

Runs are queued on Celery by name through the outbox, so none is lost when the broker is away.
"""

from __future__ import annotations

from django.utils import timezone

from costs.alerts import raise_exhausted
from costs.budgets import blocking_budget
from costs.metering import period_of
from infrastructure import outbox
from infrastructure.prepared import insert_new, update_where
from organization.models import Agent

from ..models import RUN_AGENT_TASK, Run, RunTrigger

# A run's priority on the broker (Redis takes 0 first): a manager's run goes before its reports'
# — what it hands out is what keeps them busy; an expert's run waiting a little costs nobody.
MANAGER_PRIORITY = 0
REPORT_PRIORITY = 6


def run_priority(agent_id: int, has_reports: bool | None = None) -> int:
    """The priority of the agent's runs: MANAGER_PRIORITY when someone reports to it."""
    if has_reports is None:
        has_reports = Agent.objects.filter(senior_id=agent_id).exists()
    return MANAGER_PRIORITY if has_reports else REPORT_PRIORITY


def dispatch(run: Run) -> None:
    """Queue the run's Celery task through the outbox (sent when the transaction commits)."""
    update_where(Run, {"pk": run.pk}, dispatched_at=timezone.now())
    outbox.enqueue(RUN_AGENT_TASK, run.pk, priority=run_priority(run.agent_id))


def new_run(
    agent: Agent, *, task_id: int | None, trigger: str, depth: int, previous: Run | None = None
) -> Run:
    """A queued run, sent when the transaction commits; `depth`: that of the run whose act woke
    it (0: none did)."""
    run = Run(
        organization_id=agent.organization_id,
        agent=agent,
        task_id=task_id,
        trigger=trigger,
        previous=previous,
        dispatched_at=timezone.now(),
        depth=depth + 1,
    )
    insert_new(run)
    priority = run_priority(agent.pk, getattr(agent, "has_reports", None))
    outbox.enqueue(RUN_AGENT_TASK, run.pk, priority=priority)
    return run


def start_run(agent: Agent, waiting: list[RunTrigger], previous: Run | None = None) -> Run:
    """A queued run for the waiting triggers (the first names its task and trigger), as deep in
    its chain as the shallowest of them."""
    first = waiting[0]
    depth = min(t.depth for t in waiting)
    run = new_run(
        agent, task_id=first.task_id, trigger=first.trigger, depth=depth, previous=previous
    )
    RunTrigger.objects.filter(pk__in=[t.pk for t in waiting]).update(run=run)
    return run


def as_shallow_as(run: Run, depth: int) -> None:
    """A queued run taking a wake-up of a chain `depth` runs long is no deeper than a run that
    wake-up would start: a human's act joining a deep chain's run gives it a fresh chain."""
    Run.objects.filter(pk=run.pk, depth__gt=depth + 1).update(depth=depth + 1)


def held_for_budget(agent: Agent) -> bool:
    """No budget left for the agent: its work waits, and the budget's exhausted alert is raised
    (once per period) for "Needs attention"."""
    budget = blocking_budget(agent)
    if budget is not None:
        raise_exhausted(budget, period_of(budget))
    return budget is not None
