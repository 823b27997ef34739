"""Resume a managed agent: wake it for what waited while it was paused or out of budget, and for
the tasks it holds that no run ever saw."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from tasks.models import Task, TaskStatus

from .. import sql
from ..models import RESUMED, Run, RunStatus, RunTrigger
from .dispatch import as_shallow_as, dispatch, held_for_budget, start_run
from .finish import MADE_EXTERNAL


def unseen_since_assigned(agent_field: str) -> Exists:
    """A task (of the outer query) `agent_field` holds has no trigger for it since it was
    assigned, but for one whose run saw nothing: failed before its input was built, or stopped
    because its agent was made external."""
    return ~Exists(
        RunTrigger.objects.filter(
            agent_id=OuterRef(agent_field),
            task_id=OuterRef("pk"),
            created_at__gte=OuterRef("assigned_at"),
        ).exclude(
            Q(run__status=RunStatus.FAILED) & (Q(run__input="") | Q(run__error=MADE_EXTERNAL))
        )
    )


@transaction.atomic
def run_resume(*, agent_id: int) -> Run | None:
    """A managed agent was resumed (or given room): wake it if work is waiting — triggers that
    arrived meanwhile, or tasks it holds, never started, that no run was woken for. An agent
    whose runs saw all it holds is not woken."""
    agent = sql.locked_agent(agent_id)
    if agent is None or not agent.is_managed or agent.is_paused:
        return None
    if held_for_budget(agent):
        return None  # still no room: budget_made_room wakes it when there is
    active = sql.locked_active_run(agent.pk)
    if active is not None:
        if active.status == RunStatus.QUEUED:
            # Held while the agent was paused: it takes what arrived meanwhile (unless a pause
            # stopped it under way: its input is fixed, what arrived waits for its end), and
            # goes now.
            if not active.attempts:
                joining = RunTrigger.objects.filter(agent=agent, run__isnull=True, held="")
                depths = list(joining.values_list("depth", flat=True))
                if depths:
                    joining.update(run=active)
                    as_shallow_as(active, min(depths))
            dispatch(active)
        return active
    waiting = sql.waiting_triggers(agent.pk)
    known = {t.task_id for t in waiting}
    fresh = (
        Task.objects.filter(assignee=agent, status=TaskStatus.ASSIGNED)
        .filter(unseen_since_assigned("assignee_id"))
        .exclude(pk__in=[pk for pk in known if pk is not None])
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )
    waiting += RunTrigger.objects.bulk_create(
        RunTrigger(organization_id=agent.organization_id, agent=agent, task_id=pk, trigger=RESUMED)
        for pk in fresh
    )
    if not waiting:
        return None
    return start_run(agent, waiting)


def wake_after_budget(
    *, organization_id: int, team_id: int | None = None, agent_id: int | None = None
) -> int:
    """A budget released the agents it held back: wake those it covers (only `team_id`'s or
    `agent_id`'s when given) whose work waited for it. Returns how many woke."""
    covered = Q(organization_id=organization_id)
    if team_id is not None:
        covered &= Q(agent__team_id=team_id)
    if agent_id is not None:
        covered &= Q(agent_id=agent_id)
    waiting = (
        RunTrigger.objects.filter(covered, run__isnull=True, held="")
        .values_list("agent_id", flat=True)
        .distinct()
    )
    held = Run.objects.filter(covered, status=RunStatus.QUEUED, agent__is_paused=False).values_list(
        "agent_id", flat=True
    )
    woke = 0
    for waiting_agent in sorted(set(waiting) | set(held)):
        woke += run_resume(agent_id=waiting_agent) is not None
    return woke
