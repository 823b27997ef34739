"""Reads, already scoped to one organization. Nothing else queries Agent/Team directly."""

import operator
from functools import reduce

from django.db import connection
from django.db.models import BooleanField, Count, Q, QuerySet
from django.db.models.expressions import RawSQL

from .errors import NotFound
from .models import Agent, AgentRole, Organization, Team, TeamRule
from .workload import workload_count


def agents_of(*, org: Organization) -> QuerySet[Agent]:
    return Agent.objects.filter(organization=org)


def agents_with_workload(*, org: Organization) -> QuerySet[Agent]:
    return (
        agents_of(org=org)
        .select_related("team", "senior", "hierarchy_role")
        .annotate(current_workload=workload_count())
    )


# What the agents API shows of an agent (organization.serializers.AgentSerializer): not the
# prompts, webhooks or LLM settings of the agent or its senior.
AGENT_API_FIELDS = (
    "organization_id", "handle", "name", "role", "team_id", "team__name", "senior_id",
    "senior__handle", "expertise", "is_paused", "workload_capacity", "availability_until",
    "hierarchy_role__role", "hierarchy_role__can_assign_to_peers",
    "hierarchy_role__can_escalate_to_supervisor",
)  # fmt: skip


def agents_for_api(*, org: Organization) -> QuerySet[Agent]:
    """`agents_with_workload`, reading only what the agents API shows."""
    return agents_with_workload(org=org).only(*AGENT_API_FIELDS)


def agent_by_handle(
    *, org: Organization, handle: str, with_workload: bool = False, rows: QuerySet | None = None
) -> Agent:
    """The agent `handle` of `org`; another organization's agent is as absent as a missing one.

    `rows` (the organization's agents, e.g. `agents_for_api(org=org)`) says how it is read.
    """
    if rows is None:
        rows = agents_with_workload(org=org) if with_workload else agents_of(org=org)
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
    rule = TeamRule.objects.filter(organization=org).select_related("default_supervisor").first()
    return rule or TeamRule(organization=org)


def holds_expertise(terms: list[str]) -> Q:
    """Agents whose expertise list holds one of `terms` exactly (case-sensitive, seed 000).

    One SQL condition on every backend: jsonb containment on PostgreSQL, json_each on SQLite
    (which has no JSON `contains` lookup). No terms match no agent.
    """
    if not terms:
        return Q(pk__in=[])
    if connection.vendor == "postgresql":
        return reduce(operator.or_, (Q(expertise__contains=[term]) for term in terms))
    table = connection.ops.quote_name(Agent._meta.db_table)
    marks = ", ".join(["%s"] * len(terms))
    holds = RawSQL(
        f"EXISTS (SELECT 1 FROM json_each({table}.expertise) WHERE json_each.value IN ({marks}))",
        list(terms),
        output_field=BooleanField(),
    )
    return Q(holds)


def with_expertise(qs: QuerySet[Agent], expertise: str) -> QuerySet[Agent]:
    """Agents whose expertise list holds `expertise` exactly (case-sensitive, seed 000)."""
    return qs.filter(holds_expertise([expertise]))


def expertise_terms(*, org: Organization) -> list[str]:
    """Every distinct expertise term of the organization's agents, in one query."""
    table = connection.ops.quote_name(Agent._meta.db_table)
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT DISTINCT jsonb_array_elements_text(expertise) FROM {table} "
            "WHERE organization_id = %s AND jsonb_typeof(expertise) = 'array'"
        )
    else:
        sql = (
            f"SELECT DISTINCT json_each.value FROM {table}, json_each({table}.expertise) "
            f"WHERE {table}.organization_id = %s AND json_type({table}.expertise) = 'array'"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, [org.pk])
        return [term for (term,) in cursor.fetchall() if isinstance(term, str)]


def teams_with_size(*, org: Organization) -> QuerySet[Team]:
    return teams_of(org=org).annotate(agent_count=Count("agents")).order_by("name")


def role_of(*, agent: Agent) -> AgentRole | None:
    return AgentRole.objects.filter(agent=agent).first()
