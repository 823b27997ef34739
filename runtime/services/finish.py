"""End a run, hand it back to the queue (its agent paused), or let it wait for budget headroom.

Each locks the agent's row, then the run's, and writes only while `token` holds the lease."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from infrastructure.prepared import update_where

from .. import sql
from ..models import ACTIVE_STATUSES, Run, RunStatus
from .dispatch import dispatch, held_for_budget, start_run

# Why a run whose agent was made external while it was under way ended: its tasks were left as
# they were, so they count as seen by no run (`unseen_since_assigned`).
MADE_EXTERNAL = (
    "The agent was made external while its run was under way: the run stopped before its next "
    "model call, its tasks left as they were."
)
# The error a run shows while it waits for budget headroom (runner.WaitForHeadroom).
WAITING_FOR_HEADROOM = "Waiting for budget headroom"


@transaction.atomic
def run_finish(
    *, run: Run, token: str, status: str, error: str = "", outcome: list | None = None
) -> Run | None:
    """End the run (if `token` still holds its lease) and start its follow-up when triggers
    waited meanwhile. Returns the run as ended, None if the lease was lost."""
    agent = sql.locked_agent(run.agent_id)
    ended = {"status": status, "error": error, "finished_at": timezone.now(), "lease_token": ""}
    if outcome is not None:
        ended["outcome"] = outcome
    # One statement, which locks the run's row (after the agent's) as it ends it: the run's
    # row is neither read back nor written whole (its input and context are large).
    where = {"pk": run.pk, "lease_token": token, "status__in": ACTIVE_STATUSES}
    if not update_where(Run, where, **ended):
        return None
    for name, value in ended.items():
        setattr(run, name, value)
    if agent is not None and agent.is_managed and not agent.is_paused:
        waiting = sql.waiting_triggers(agent.pk)
        # Out of budget, the triggers wait as a paused agent's do: room in the budget wakes it
        # (wake_after_budget). Read only when something waits: most runs end with nothing.
        if waiting and not held_for_budget(agent):
            start_run(agent, waiting, previous=run)
    return run


@transaction.atomic
def run_hand_back(*, run: Run, token: str) -> bool:
    """Its agent was paused under way: the run goes back to `queued`, its input and turns kept,
    to continue when the agent is resumed; it keeps one start at most (at least one, so that it
    reads its turns). False when the lease was lost."""
    agent = sql.locked_agent(run.agent_id)
    handed = Run.objects.filter(pk=run.pk, lease_token=token).update(
        status=RunStatus.QUEUED,
        lease_token="",
        attempts=Greatest(F("attempts") - 1, Value(1)),
    )
    if handed and agent is not None and not agent.is_paused:
        dispatch(run)  # resumed meanwhile: its run_resume found it running
    return bool(handed)


@transaction.atomic
def run_wait_for_headroom(*, run: Run, token: str, reason: str) -> bool:
    """A model call did not fit only because calls under way hold its budgets' money: the run
    goes back to `queued`, saying why, and its task sends it again after a back-off (it keeps
    its starts as a handed-back run does). False when the lease was lost."""
    sql.locked_agent(run.agent_id)
    return bool(
        Run.objects.filter(pk=run.pk, lease_token=token).update(
            status=RunStatus.QUEUED,
            lease_token="",
            dispatched_at=timezone.now(),
            attempts=Greatest(F("attempts") - 1, Value(1)),
            error=f"{WAITING_FOR_HEADROOM}: {reason}"[:2000],
        )
    )
