"""Reads of the runtime, scoped to the caller: an agent sees its own runs, a human all of its
organization's; anything else answers 404 as if it did not exist."""

from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from costs.selectors import cost_subquery
from infrastructure.errors import NotFound
from infrastructure.inputs import parse_id
from organization.caller import Caller
from tasks.models import Task

from .models import Run, RunTrigger, RunTurn


def runs_of(*, caller: Caller) -> QuerySet[Run]:
    runs = Run.objects.filter(organization=caller.organization)
    if caller.agent is not None:
        runs = runs.filter(agent=caller.agent)
    runs = runs.annotate(cost_usd=cost_subquery("run"))
    return runs.select_related("agent", "task").prefetch_related(
        Prefetch("triggers", queryset=RunTrigger.objects.order_by("pk")),
        Prefetch("turn_rows", queryset=RunTurn.objects.order_by("index")),
    )


def run_for(*, caller: Caller, run_id) -> Run:
    """The run, or 404 `run_not_found` (another agent's, another organization's, or no id)."""
    pk = parse_id(run_id)
    run = runs_of(caller=caller).filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound(f"Run not found: {run_id}", "run_not_found")
    return run


def held_wakes_condition() -> Exists:
    """A task (of the outer query) with a wake-up a bound holds."""
    return Exists(RunTrigger.objects.filter(task_id=OuterRef("pk")).exclude(held=""))


def tasks_with_held_wakes(*, organization_id: int) -> QuerySet[Task]:
    """The organization's tasks with a wake-up a bound holds (for a human to release)."""
    held = RunTrigger.objects.filter(
        organization_id=organization_id, task_id=OuterRef("pk")
    ).exclude(held="")
    return Task.objects.filter(Exists(held), organization_id=organization_id)
