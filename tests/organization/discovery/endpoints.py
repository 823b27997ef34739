"""Tenancy table of the expert-discovery and agent-card endpoints, part of tests/organization/endpoints.py."""

from tests.factories import make_agent, make_team
from tests.tenancy import COLLECTION, Endpoint


def an_agent(org) -> dict:
    """An agent of `org` in a team and the main repo (so it is a discoverable expert)."""
    team = make_team(org)
    agent = make_agent(org, team=team, expertise=["Discovery"], role="Cartographer")
    return {"agent_id": agent.handle, "team": team.name}


ENDPOINTS = [
    Endpoint("GET", "/api/experts", an_agent, kind=COLLECTION),
    Endpoint("GET", "/api/experts?agent={agent_id}", an_agent, callers=("org",)),
    Endpoint(
        "POST",
        "/api/agents/me/status",
        an_agent,
        body={"status": "pending"},
        kind=COLLECTION,
        callers=("agent",),
    ),
    Endpoint("GET", "/api/agents/{agent_id}/discovery-prompt", an_agent, callers=("org",)),
    Endpoint("GET", "/api/agents/{agent_id}/card", an_agent),
    Endpoint("GET", "/api/agent-cards", an_agent, kind=COLLECTION),
]
