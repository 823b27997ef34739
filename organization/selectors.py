"""Reads, already scoped to one organization. Nothing else queries Agent/Team directly."""

from django.db import connection
from django.db.models import BooleanField, Case, CharField, Count, F, Q, QuerySet, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.lookups import GreaterThanOrEqual, LessThanOrEqual

from tasks.models import HELD_STATUSES

from .errors import NotFound
from .models import (
    BUSY_FROM,
    IDLE_UP_TO,
    Agent,
    AgentRole,
    AgentStatus,
    Organization,
    Team,
    TeamRule,
)


def workload_count() -> Count:
    """Tasks held in assigned/in_progress/blocked: the agent's derived workload."""
    return Count("held_tasks", filter=Q(held_tasks__status__in=HELD_STATUSES))


def agents_of(*, org: Organization) -> QuerySet[Agent]:
    return Agent.objects.filter(organization=org)


def agents_with_workload(*, org: Organization) -> QuerySet[Agent]:
    return (
        agents_of(org=org)
        .select_related("team", "senior", "hierarchy_role")
        .annotate(current_workload=workload_count())
    )


def agent_by_handle(*, org: Organization, handle: str, with_workload: bool = False) -> Agent:
    """The agent `handle` of `org`; another organization's agent is as absent as a missing one."""
    qs = agents_with_workload(org=org) if with_workload else agents_of(org=org)
    agent = qs.filter(handle=handle).first()
    if agent is None:
        raise NotFound(f"Agent not found: {handle}", "agent_not_found")
    return agent


def workload_of(agent: Agent) -> int:
    from tasks.models import Task

    return Task.objects.filter(assignee=agent, status__in=HELD_STATUSES).count()


def teams_of(*, org: Organization) -> QuerySet[Team]:
    return Team.objects.filter(organization=org)


def roles_of(*, org: Organization) -> QuerySet[AgentRole]:
    return AgentRole.objects.filter(agent__organization=org).select_related("agent")


def team_rule_of(*, org: Organization) -> TeamRule:
    """The organization's rules; unsaved defaults when none were set (seed 003)."""
    rule = TeamRule.objects.filter(organization=org).select_related("default_supervisor").first()
    return rule or TeamRule(organization=org)


def with_expertise(qs: QuerySet[Agent], expertise: str) -> QuerySet[Agent]:
    """Agents whose expertise list holds `expertise` exactly (case-sensitive, seed 000).

    One SQL condition on every backend: jsonb containment on PostgreSQL, json_each on SQLite
    (which has no JSON `contains` lookup).
    """
    if connection.vendor == "postgresql":
        return qs.filter(expertise__contains=[expertise])
    table = connection.ops.quote_name(Agent._meta.db_table)
    holds = RawSQL(
        f"EXISTS (SELECT 1 FROM json_each({table}.expertise) WHERE json_each.value = %s)",
        [expertise],
        output_field=BooleanField(),
    )
    return qs.filter(holds)


# `?status=available` (seed 000's filter, seed 001's `GET /api/agents?status=available`).
AVAILABLE = "available"
AVAILABLE_STATUSES = (AgentStatus.IDLE, AgentStatus.ACTIVE)


def status_expression(workload: str = "current_workload") -> Case:
    """models.status_for() in SQL, over the `workload` annotation and the agent's capacity."""
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


def with_status(qs: QuerySet[Agent], status: str) -> QuerySet[Agent]:
    """The computed status as a filter (`available` = idle or active); `qs` must be annotated
    with `current_workload`."""
    qs = qs.annotate(computed_status=status_expression())
    if status == AVAILABLE:
        return qs.filter(computed_status__in=[s.value for s in AVAILABLE_STATUSES])
    if status in AgentStatus.values:
        return qs.filter(computed_status=status)
    return qs.none()


def teams_with_size(*, org: Organization) -> QuerySet[Team]:
    return teams_of(org=org).annotate(agent_count=Count("agents")).order_by("name")


def role_of(*, agent: Agent) -> AgentRole | None:
    return AgentRole.objects.filter(agent=agent).first()
