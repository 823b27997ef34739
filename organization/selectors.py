"""Reads, already scoped to one organization. Nothing else queries Agent/Team directly."""

from django.db.models import Count, Q, QuerySet

from tasks.models import HELD_STATUSES

from .errors import NotFound
from .models import Agent, AgentRole, Organization, Team, TeamRule


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
