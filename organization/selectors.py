"""Reads, already scoped to one organization. Nothing else queries Agent/Team directly."""

import orjson
from django.db.models import Count, QuerySet

from infrastructure.errors import NotFound

from . import sql
from .models import Agent, AgentRole, Organization, Team, TeamRule
from .workload import agents_with_workload, held_counts, status_for


def agents_of(*, org: Organization) -> QuerySet[Agent]:
    return Agent.objects.filter(organization=org)


# What the agents API shows of an agent (organization.serializers.AgentSerializer): not the
# prompts, webhooks or LLM settings of the agent or its senior.
AGENT_API_FIELDS = (
    "organization_id",
    "handle",
    "name",
    "role",
    "team_id",
    "team__name",
    "senior_id",
    "senior__handle",
    "expertise",
    "is_paused",
    "workload_capacity",
    "availability_until",
    "hierarchy_role__role",
    "hierarchy_role__can_assign_to_peers",
    "hierarchy_role__can_escalate_to_supervisor",
    "runtime",
)


def agents_for_api(*, org: Organization) -> QuerySet[Agent]:
    """`agents_with_workload`, reading only what the agents API shows."""
    return agents_with_workload(org=org).only(*AGENT_API_FIELDS)


def agent_for_api(*, org: Organization, handle: str) -> dict:
    """One agent as the agents API shows it (AgentSerializer's fields), in one query compiled
    once per process; an agent of another organization is as absent as a missing one."""
    rows = sql.agent_api_rows(organization_id=org.pk, handle=handle)
    if not rows:
        raise NotFound(f"Agent not found: {handle}", "agent_not_found")
    (
        handle,
        name,
        role,
        team,
        team_id,
        senior,
        expertise,
        is_paused,
        workload,
        capacity,
        until,
        role_id,
        hierarchy_role,
        can_assign,
        can_escalate,
        runtime,
    ) = rows[0]
    return {
        "id": handle,
        "name": name,
        "role": role,
        "team": team,
        "team_id": team_id,
        "seniorId": senior,
        "expertise": orjson.loads(expertise),
        "status": status_for(is_paused=is_paused, workload=workload, capacity=capacity),
        "current_workload": workload,
        "workload_capacity": capacity,
        "availability_until": until,
        "paused": is_paused,
        "hierarchy_role": None
        if role_id is None
        else {
            "role": hierarchy_role,
            "can_assign_to_peers": can_assign,
            "can_escalate_to_supervisor": can_escalate,
        },
        "runtime": runtime,
    }


def agent_by_handle(
    *, org: Organization, handle: str, with_workload: bool = False, rows: QuerySet | None = None
) -> Agent:
    """The agent `handle` of `org`; another organization's agent is as absent as a missing one.

    `rows` (the organization's agents, e.g. `agents_for_api(org=org)`) says how it is read.
    """
    if rows is None and not with_workload:
        found = sql.agent_named(organization_id=org.pk, handle=handle)
        agent = found[0] if found else None
    else:
        if rows is None:
            rows = agents_with_workload(org=org)
        # The handle is unique in the organization: no sort for `first()` to add.
        agent = next(iter(rows.filter(handle=handle).order_by()[:1]), None)
    if agent is None:
        raise NotFound(f"Agent not found: {handle}", "agent_not_found")
    return agent


def teams_of(*, org: Organization) -> QuerySet[Team]:
    return Team.objects.filter(organization=org)


def roles_of(*, org: Organization) -> QuerySet[AgentRole]:
    return AgentRole.objects.filter(agent__organization=org).select_related("agent")


def team_rule_of(*, org: Organization) -> TeamRule:
    """The organization's rules; unsaved defaults when none were set (seed 003)."""
    rule = next(iter(sql.team_rules(organization_id=org.pk)), None)
    return rule or TeamRule(organization=org)


def with_expertise(qs: QuerySet[Agent], expertise: str) -> QuerySet[Agent]:
    """Agents whose expertise list holds `expertise` exactly (case-sensitive, seed 000)."""
    return qs.filter(sql.holds_expertise([expertise]))


def teams_with_size(*, org: Organization) -> QuerySet[Team]:
    return teams_of(org=org).annotate(agent_count=Count("agents")).order_by("name")


def role_of(*, agent: Agent) -> AgentRole | None:
    return AgentRole.objects.filter(agent=agent).first()


# A reporting line is walked a level at a time; `Agent.clean` refuses cycles, and this bound
# stops a walk even over rows written past it.
REPORTING_LINE_LEVELS = 100


def reports_below(agent: Agent) -> set[int]:
    """The ids of everyone down `agent`'s reporting line (its reports, theirs, …): one query."""
    return sql.reports_below(
        organization_id=agent.organization_id, agent_id=agent.pk, levels=REPORTING_LINE_LEVELS
    )


def reports_to(agent: Agent, senior: Agent) -> bool:
    """Whether `senior` is up `agent`'s reporting line (its senior, theirs, …): no query for a
    direct report, one per level above."""
    seen: set[int] = set()
    current = agent.senior_id
    while current is not None and current not in seen and len(seen) < REPORTING_LINE_LEVELS:
        if current == senior.pk:
            return True
        seen.add(current)
        current = (
            Agent.objects.filter(organization_id=agent.organization_id, pk=current)
            .values_list("senior_id", flat=True)
            .first()
        )
    return False


def workloads_of(agent_ids) -> dict[int, int]:
    """The workload of each agent of `agent_ids`, 0 included, in one query."""
    ids = sorted(set(agent_ids))
    if len(ids) == 1:
        counts = dict(sql.held_count_rows(agent_id=ids[0]))
    else:
        counts = dict(held_counts(ids))
    return {pk: counts.get(pk, 0) for pk in ids}
