"""Tenancy table of the organization endpoints (contract: tests/tenancy.py)."""

from organization.models import AgentRole, TeamRule
from tests.factories import make_agent, make_team
from tests.organization.discovery.endpoints import ENDPOINTS as DISCOVERY_ENDPOINTS
from tests.tenancy import COLLECTION, Endpoint


def an_agent(org) -> dict:
    """An agent of `org` in a team, with a unique handle (it also marks `org` in collections)."""
    team = make_team(org)
    agent = make_agent(org, team=team, expertise=["Tenancy"])
    return {"agent_id": agent.handle, "team": team.name}


def a_supervisor(org) -> dict:
    """A supervisor who is also the organization's default supervisor."""
    kwargs = an_agent(org)
    agent = org.agents.get(handle=kwargs["agent_id"])
    AgentRole.objects.create(agent=agent, role="supervisor", can_assign_to_peers=True)
    TeamRule.objects.update_or_create(organization=org, defaults={"default_supervisor": agent})
    return kwargs


ROSTER_TOOL = {"toolName": "get_organization_roster", "params": {"filter": "all"}}

ENDPOINTS = [
    Endpoint("GET", "/api/roster", an_agent, kind=COLLECTION),
    Endpoint("GET", "/api/roster?filter=my_team&agent={agent_id}", an_agent, callers=("org",)),
    Endpoint("POST", "/api/agent-engine/call-tool", an_agent, body=ROSTER_TOOL, kind=COLLECTION),
    Endpoint(
        "POST",
        "/api/agent-engine/call-tool",
        an_agent,
        body={"toolName": "get_my_context", "params": {"agent": "{agent_id}"}},
        callers=("org",),
    ),
    Endpoint("GET", "/api/tools", an_agent, kind=COLLECTION),
    Endpoint("GET", "/api/agents", a_supervisor, kind=COLLECTION),
    Endpoint("GET", "/api/agents?team={team}", a_supervisor, kind=COLLECTION),
    Endpoint("GET", "/api/agents/{agent_id}", an_agent),
    # Acts on the key's own agent: another organization's agent key changes only itself.
    Endpoint(
        "POST",
        "/api/agents/me/availability",
        an_agent,
        body={"availability_until": None},
        kind=COLLECTION,
        callers=("agent",),
    ),
    Endpoint("GET", "/api/agents/{agent_id}/system-prompt", an_agent),
    Endpoint("GET", "/api/teams", an_agent, kind=COLLECTION),
    # The hierarchy is for organization keys and admin members (an agent key answers 403).
    Endpoint("GET", "/api/team/roles", a_supervisor, kind=COLLECTION, callers=("org",)),
    Endpoint(
        "POST", "/api/team/roles", an_agent, body={"agent_id": "{agent_id}", "role": "worker"}
    ),
    Endpoint("GET", "/api/team/roles/{agent_id}", a_supervisor),
    Endpoint("POST", "/api/team/roles/{agent_id}/delete", a_supervisor, body={}),
    Endpoint("GET", "/api/team/rules", a_supervisor, kind=COLLECTION, callers=("org",)),
    Endpoint(
        "POST", "/api/team/rules", a_supervisor, body={"default_supervisor_agent_id": "{agent_id}"}
    ),
    Endpoint("GET", "/api/team/summary", a_supervisor, kind=COLLECTION, callers=("org",)),
    # Who changed what (issue 13 §3): organization keys only (an agent key answers 403).
    Endpoint("GET", "/api/audit", a_supervisor, kind=COLLECTION, callers=("org",)),
    # Expert discovery and agent cards (tests/organization/discovery/endpoints.py).
    *DISCOVERY_ENDPOINTS,
]
