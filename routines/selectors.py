"""Reads of routines, scoped to the caller: the organization sees all, an agent those its team
or itself owns."""

from django.db.models import F, OuterRef, Q, QuerySet, Subquery

from infrastructure.errors import NotFound
from infrastructure.inputs import parse_id
from organization.caller import Caller

from .models import Occurrence, Outcome, Routine

LISTED = (Outcome.CREATED, Outcome.SKIPPED)


def routines_visible_to(caller: Caller) -> QuerySet[Routine]:
    rows = Routine.objects.filter(organization=caller.organization)
    agent = caller.agent
    if agent is not None:
        mine = Q(agent=agent)
        if agent.team_id is not None:
            mine |= Q(team_id=agent.team_id)
        rows = rows.filter(mine)
    return rows.select_related("team", "agent", "periodic_task").order_by("title", "pk")


def last_occurrences(routines: list[Routine]) -> dict[int, Occurrence]:
    """Each routine's newest listed occurrence, by routine id, in two statements whatever their
    history's length."""
    newest = (
        Occurrence.objects.filter(routine=OuterRef("pk"), outcome__in=LISTED)
        .order_by("-at", "-pk")
        .values("pk")[:1]
    )
    ids = (
        Routine.objects.filter(pk__in=[r.pk for r in routines])
        .annotate(last=Subquery(newest))
        .values_list("last", flat=True)
    )
    found = Occurrence.objects.filter(pk__in=[i for i in ids if i is not None])
    return {o.routine_id: o for o in found}


def routine_for(caller: Caller, pk) -> Routine:
    """The routine `pk` if the caller may see it; 404 otherwise, as if it did not exist."""
    routine = routines_visible_to(caller).filter(pk=parse_id(pk) or 0).first()
    if routine is None:
        raise NotFound(f"Routine not found: {pk}", "routine_not_found")
    return routine


def routine_by_id(pk) -> Routine | None:
    """Any routine, for the signed webhook (its signature is the caller's only credential)."""
    return Routine.objects.filter(pk=parse_id(pk) or 0).first()


def occurrences_of(routine: Routine) -> QuerySet[Occurrence]:
    """Its history, newest first (held occurrences appear once they are created)."""
    return routine.occurrences.filter(outcome__in=LISTED).order_by("-at", "-pk")


def with_last(rows: QuerySet[Routine]) -> QuerySet[Routine]:
    """Each routine annotated with its newest listed occurrence's `last_at`, `last_outcome` and
    `last_task`, in the same statement (the admin's list and the console's panel)."""
    newest = Occurrence.objects.filter(routine=OuterRef("pk"), outcome__in=LISTED).order_by(
        "-at", "-pk"
    )
    return rows.annotate(
        last_at=Subquery(newest.values("at")[:1]),
        last_outcome=Subquery(newest.values("outcome")[:1]),
        last_task=Subquery(newest.values("task_id")[:1]),
    )


def routines_of(org) -> QuerySet[Routine]:
    """The organization's routines, soonest next run first, with their last occurrence."""
    rows = Routine.objects.filter(organization=org).select_related("team", "agent")
    return with_last(rows).order_by(F("next_run_at").asc(nulls_last=True), "title", "pk")
