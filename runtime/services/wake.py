"""Wake a managed agent: start a run, join its queued one, or wait for the next.

The agent's row is the lock of its runs: a wake-up takes it first, then the run's row."""

from __future__ import annotations

import contextvars
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from infrastructure.prepared import insert_new
from organization.models import Agent
from tasks.models import Task

from .. import sql
from ..models import Run, RunStatus, RunTrigger
from .bounds import Cause, bound_passed
from .dispatch import as_shallow_as, held_for_budget, new_run

log = logging.getLogger(__name__)

# The run whose tool call is being executed in this thread (set by the runner): a wake-up it
# causes records it as `woken_by`.
current_run: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "current_run", default=None
)


def _hour_ago() -> datetime:
    return timezone.now() - timedelta(hours=1)


def _lock_for_wake(agent_id: int, woken_by: int | None) -> tuple[Agent | None, bool, Cause | None]:
    """(the agent, locked; whether its organization has any budget; the Cause when a run's act
    woke it). Its active run is read after the lock: it then sees every run committed before."""
    limit = settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR
    agent, budgets, depth, runs = sql.lock_for_wake(agent_id, woken_by, _hour_ago(), limit)
    if agent is None or woken_by is None:
        return agent, budgets, None
    return agent, budgets, Cause(woken_by, depth or 0, runs)


def _held(agent: Agent, trigger: str, task: Task | None, cause: Cause, held: str) -> None:
    log.warning("%s not woken about task %s: %s", agent.handle, task and task.pk, held)
    caused = {"woken_by_id": cause.run_id, "depth": cause.depth, "held": held}
    insert_new(
        RunTrigger(
            organization_id=agent.organization_id, agent=agent, task=task, trigger=trigger, **caused
        )
    )


@transaction.atomic
def run_wake(*, agent: Agent, trigger: str, task: Task | None) -> Run | None:
    """Work reached a managed agent: start a run, join its queued one, or (while it runs, or is
    paused) wait for the next; a wake-up past a bound of wake chains is held for a human to
    release. Returns the run it started or joined, None otherwise."""
    agent, budgets, cause = _lock_for_wake(agent.pk, current_run.get())
    if agent is None or not agent.is_managed:
        return None
    depth = cause.depth if cause else 0
    if held := bound_passed(cause, trigger, task):
        _held(agent, trigger, task, cause, held)
        return None
    task_id = task.pk if task else None
    if agent.is_paused or (budgets and held_for_budget(agent)):
        # It waits: resuming the agent, or room in its budget, wakes it (run_resume).
        run = None
    elif sql.is_postgresql():
        found = sql.join_active_run(
            agent,
            trigger=trigger,
            task_id=task_id,
            woken_by=cause.run_id if cause else None,
            depth=depth,
            now=timezone.now(),
        )
        if found is not None:
            return found[0]  # joined its queued run, or waits for its running one's end
        run = new_run(agent, task_id=task_id, trigger=trigger, depth=depth)
    elif (active := sql.locked_active_run(agent.pk)) is None:
        run = new_run(agent, task_id=task_id, trigger=trigger, depth=depth)
    elif active.status == RunStatus.QUEUED and not active.attempts:
        # Not started yet: it reads this task too when it starts (its row lock orders this
        # before or after the claim, never in between). One handed back by a pause has its
        # input already: the trigger waits for its end, as for a running one.
        run = active
        as_shallow_as(run, depth)
    else:
        run = None  # coalesced: the run's end starts one follow-up with every waiting trigger
    insert_new(
        RunTrigger(
            organization_id=agent.organization_id,
            agent=agent,
            run=run,
            task=task,
            trigger=trigger,
            woken_by_id=cause.run_id if cause else None,
            depth=depth,
        )
    )
    return run
