"""An agent's workload and status: the one module that computes them, in Python and in SQL.

The workload counts the tasks an agent holds; the task statuses that count as work are named
here, below the tasks app (tasks/models.py takes its HELD_STATUSES from this module).
"""

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThanOrEqual, LessThanOrEqual

from .models import Agent, AgentStatus, Organization

# --- the task statuses that count as work ----------------------------------------------

# An agent holds a task assigned to it, in progress or blocked: its workload.
HELD_STATUSES = ("assigned", "in_progress", "blocked")
# A queued task waits for the agent it is queued for.
QUEUED_STATUS = "queued"

# The reverse relations the tasks app gives Agent (Task.assignee, Task.queued_for).
HELD_RELATION = "held_tasks"
QUEUED_RELATION = "queued_tasks"


def held_statuses() -> tuple:
    """The task statuses that count towards an agent's workload."""
    return HELD_STATUSES


def tasks_along(relation: str) -> tuple[QuerySet, str]:
    """All rows of the model behind `Agent.<relation>`, and its field that points at the agent."""
    rel = Agent._meta.get_field(relation)
    return rel.related_model._default_manager.all(), rel.field.name


# --- counting --------------------------------------------------------------------------


def count_of(rows: QuerySet, column: str) -> Coalesce:
    """A correlated COUNT of `rows` whose `column` is the outer row, 0 when none.

    A subquery, so two counts on one queryset never multiply each other's rows.
    """
    counted = (
        rows.filter(**{column: OuterRef("pk")})
        .order_by()
        .values(column)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def workload_count() -> Count:
    """The agent's workload as a JOIN + COUNT annotation (one agent query, GROUP BY)."""
    return Count(HELD_RELATION, filter=Q(**{f"{HELD_RELATION}__status__in": HELD_STATUSES}))


def agents_with_workload(*, org: Organization | int) -> QuerySet[Agent]:
    """The organization's agents with their team, senior and role, annotated with `current_workload`."""
    return (
        Agent.objects.filter(organization=org)
        .select_related("team", "senior", "hierarchy_role")
        .annotate(current_workload=workload_count())
    )


def workload_subquery() -> Coalesce:
    """The agent's workload as a correlated subquery (combines with other counts)."""
    tasks, column = tasks_along(HELD_RELATION)
    return count_of(tasks.filter(status__in=HELD_STATUSES), column)


def workload_subquery_of(agent: Agent) -> Coalesce:
    """One agent's workload as a subquery (to read it with another query of the same statement)."""
    tasks, column = tasks_along(HELD_RELATION)
    counted = (
        tasks.filter(**{column: agent, "status__in": HELD_STATUSES})
        .order_by()
        .values(column)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def queue_length() -> Coalesce:
    """How many tasks wait in the agent's queue, as a correlated subquery."""
    tasks, column = tasks_along(QUEUED_RELATION)
    return count_of(tasks.filter(status=QUEUED_STATUS), column)


def held_counts(agent_ids) -> QuerySet:
    """(agent id, tasks held) of each agent of `agent_ids` that holds any."""
    tasks, column = tasks_along(HELD_RELATION)
    return (
        tasks.filter(**{f"{column}_id__in": agent_ids, "status__in": HELD_STATUSES})
        .values(f"{column}_id")
        .annotate(n=Count("pk"))
        .values_list(f"{column}_id", "n")
        .order_by()
    )


# --- status: Python and SQL, one rule -------------------------------------------------

# Status thresholds as fractions of the agent's capacity, so that capacity 5 gives exactly seed
# 000's table (<=2 idle, 3 active, >=4 busy) and any other capacity scales with it. Integer
# arithmetic only, so that status_expression() applies the same rule in SQL.
IDLE_UP_TO = (2, 5)  # workload <= 2/5 of capacity: idle
BUSY_FROM = (4, 5)  # workload >= 4/5 of capacity (and always at capacity): busy

# `?status=available` (seed 000's filter, seed 001's `GET /api/agents?status=available`).
AVAILABLE = "available"
AVAILABLE_STATUSES = (AgentStatus.IDLE, AgentStatus.ACTIVE)


def status_for(*, is_paused: bool, workload: int, capacity: int) -> str:
    """Seed 000's status rule, relative to capacity: paused → offline; ≤2/5 idle; ≥4/5 busy.

    An agent without room (workload ≥ capacity, capacity 0 included) is never idle or active.
    """
    if is_paused:
        return AgentStatus.OFFLINE
    if workload * BUSY_FROM[1] >= capacity * BUSY_FROM[0] or workload >= capacity:
        return AgentStatus.BUSY
    if workload * IDLE_UP_TO[1] <= capacity * IDLE_UP_TO[0]:
        return AgentStatus.IDLE
    return AgentStatus.ACTIVE


def status_expression(workload: str = "current_workload") -> Case:
    """status_for() in SQL, over the `workload` annotation and the agent's capacity."""
    load, capacity = F(workload), F("workload_capacity")
    return Case(
        When(is_paused=True, then=Value(AgentStatus.OFFLINE.value)),
        When(
            GreaterThanOrEqual(load * BUSY_FROM[1], capacity * BUSY_FROM[0])
            | GreaterThanOrEqual(load, capacity),
            then=Value(AgentStatus.BUSY.value),
        ),
        When(
            LessThanOrEqual(load * IDLE_UP_TO[1], capacity * IDLE_UP_TO[0]),
            then=Value(AgentStatus.IDLE.value),
        ),
        default=Value(AgentStatus.ACTIVE.value),
        output_field=CharField(),
    )


def status_condition(status: str) -> Q:
    """The computed status as a condition on the `computed_status` annotation (status_expression),
    to combine with others (`available` = idle or active; an unknown status matches nothing)."""
    if status == AVAILABLE:
        return Q(computed_status__in=[s.value for s in AVAILABLE_STATUSES])
    if status in AgentStatus.values:
        return Q(computed_status=status)
    return Q(pk__in=[])


def with_status(qs: QuerySet[Agent], status: str) -> QuerySet[Agent]:
    """The computed status as a filter (`available` = idle or active); `qs` must be annotated
    with `current_workload`."""
    if status != AVAILABLE and status not in AgentStatus.values:
        return qs.none()
    return qs.annotate(computed_status=status_expression()).filter(status_condition(status))


# --- who needs a manager (the console's dashboard, agent list filters) --------------------


def at_capacity(qs: QuerySet[Agent], workload: str = "current_workload") -> QuerySet[Agent]:
    """Agents holding as many tasks as they may (workload ≥ capacity); `qs` is annotated with
    `workload` (`workload_count()` or `workload_subquery()`)."""
    return qs.filter(**{f"{workload}__gte": F("workload_capacity")})


def offline_with_work(qs: QuerySet[Agent]) -> QuerySet[Agent]:
    """Offline (paused) agents who still have reports or tasks queued for them: work that waits
    on someone who receives nothing."""
    tasks, column = tasks_along(QUEUED_RELATION)
    queued = tasks.filter(status=QUEUED_STATUS, **{column: OuterRef("pk")})
    reports = Agent.objects.filter(senior=OuterRef("pk"))
    return qs.filter(is_paused=True).filter(Exists(queued) | Exists(reports))
