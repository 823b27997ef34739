"""Seed 003's team hierarchy: agent roles, the team rules, the summary; returns models.

For an organization key or admin member only: invalid input (400), then the agent looked up in
the caller's organization (404), then the human check (403). The serializers build the JSON.
"""

from typing import NamedTuple

from django.db import transaction

from infrastructure.errors import Invalid, NotFound

from .caller import Caller
from .history import record_changes
from .models import Agent, AgentRole, HierarchyRole, Organization, TeamRule
from .selectors import agents_of, roles_of, team_rule_of

ROLE_FLAGS = ("can_assign_to_peers", "can_escalate_to_supervisor")
RULE_FLAGS = ("allow_peer_assignment", "require_supervisor_for_tasks")


def _agent_in(org: Organization, agent_id, message: str = "Agent not found in workspace") -> Agent:
    agent = agents_of(org=org).filter(handle=str(agent_id)).first()
    if agent is None:
        raise NotFound(message, "agent_not_found")
    return agent


# --- reads --------------------------------------------------------------------------


class TeamSummary(NamedTuple):
    """Seed 003's summary: who holds which role, who holds none, and the rules."""

    supervisors: list[AgentRole]
    workers: list[AgentRole]
    specialists: list[AgentRole]
    unassigned_agents: list[Agent]
    rules: TeamRule


def roles_list(*, caller: Caller) -> list[AgentRole]:
    caller.require_human()
    return list(roles_of(org=caller.organization).order_by("agent__handle"))


def role_get(*, caller: Caller, agent_id: str) -> AgentRole:
    agent = _agent_in(caller.organization, agent_id)
    caller.require_human()
    role = roles_of(org=caller.organization).filter(agent=agent).first()
    if role is None:
        raise NotFound(f"No role assigned to agent {agent.handle}", "role_not_found")
    return role


def rules_get(*, caller: Caller) -> TeamRule:
    """The organization's rules; unsaved defaults when none were set."""
    caller.require_human()
    return team_rule_of(org=caller.organization)


def team_summary(*, caller: Caller) -> TeamSummary:
    """Who holds which role, who holds none, and the rules (seed 003's summary)."""
    caller.require_human()
    org = caller.organization
    groups = {HierarchyRole.SUPERVISOR: [], HierarchyRole.WORKER: [], HierarchyRole.SPECIALIST: []}
    for role in roles_of(org=org).order_by("agent__handle"):
        groups[role.role].append(role)
    unassigned = agents_of(org=org).filter(hierarchy_role__isnull=True).order_by("handle")
    return TeamSummary(
        supervisors=groups[HierarchyRole.SUPERVISOR],
        workers=groups[HierarchyRole.WORKER],
        specialists=groups[HierarchyRole.SPECIALIST],
        unassigned_agents=list(unassigned),
        rules=team_rule_of(org=org),
    )


# --- writes -------------------------------------------------------------------------


@transaction.atomic
def role_set(*, caller: Caller, data) -> AgentRole:
    """Upsert the role of `data["agent_id"]`; omitted flags keep their value (defaults on create)."""
    role_name = data["role"]
    flags = {name: data.get(name) for name in ROLE_FLAGS}
    agent = _agent_in(caller.organization, data["agent_id"])
    caller.require_human()

    # get_or_create re-reads on a unique-constraint race, so two concurrent upserts of the
    # same agent end with one row instead of a 500.
    # Created with the flags asked for, so its history starts with them.
    given = {name: value for name, value in flags.items() if value is not None}
    role, _ = AgentRole.objects.select_for_update().get_or_create(
        agent=agent, defaults={"role": role_name, **given}
    )
    role.role = role_name
    for name, value in flags.items():
        if value is not None:
            setattr(role, name, value)
    role.save()
    if role_name != HierarchyRole.SUPERVISOR:
        drop_default_supervisor(agent)
    return role


@transaction.atomic
def role_delete(*, caller: Caller, agent_id: str) -> None:
    agent = _agent_in(caller.organization, agent_id)
    caller.require_human()
    deleted, _ = AgentRole.objects.filter(agent=agent).delete()
    if not deleted:
        raise NotFound(f"No role assigned to agent {agent.handle}", "role_not_found")
    drop_default_supervisor(agent)


def drop_default_supervisor(agent: Agent) -> None:
    """The default supervisor must hold the supervisor role: losing it (or being deleted)
    clears the rule's pointer, with its audit row."""
    rules = TeamRule.objects.filter(organization_id=agent.organization_id, default_supervisor=agent)
    if rules.update(default_supervisor=None):
        record_changes(TeamRule.objects.filter(organization_id=agent.organization_id))


@transaction.atomic
def rules_set(*, caller: Caller, data) -> TeamRule:
    """Update the organization's rules; only the fields present in `data` change."""
    flags = {name: data.get(name) for name in RULE_FLAGS}
    org = caller.organization
    supervisor = None
    clear_supervisor = "default_supervisor_agent_id" in data and data[
        "default_supervisor_agent_id"
    ] in (None, "")
    if "default_supervisor_agent_id" in data and not clear_supervisor:
        supervisor = _agent_in(
            org, data["default_supervisor_agent_id"], "Supervisor agent not found in workspace"
        )
    caller.require_human()
    if supervisor is not None:
        # Locked: a demotion (role_set, which locks the same row) waits for this rule, or came
        # first and is seen; either way the default supervisor holds the role.
        role = AgentRole.objects.select_for_update().filter(agent=supervisor).first()
        if role is None or role.role != HierarchyRole.SUPERVISOR:
            raise Invalid(
                "Agent must have supervisor role to be default supervisor", "not_a_supervisor"
            )

    # Created with the values asked for: its history starts with them, not with the defaults.
    defaults = {name: value for name, value in flags.items() if value is not None}
    if supervisor is not None:
        defaults["default_supervisor"] = supervisor
    rule, _ = TeamRule.objects.select_for_update().get_or_create(
        organization=org, defaults=defaults
    )
    for name, value in flags.items():
        if value is not None:
            setattr(rule, name, value)
    if supervisor is not None:
        rule.default_supervisor = supervisor
    elif clear_supervisor:
        rule.default_supervisor = None
    rule.save()
    return rule
