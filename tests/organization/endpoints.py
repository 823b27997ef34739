"""Tenancy table of the organization endpoints (contract: tests/tenancy.py)."""

from tests.factories import make_agent, make_team
from tests.tenancy import COLLECTION, Endpoint


def an_agent(org) -> dict:
    """An agent of `org` in a team, with a unique handle (it also marks `org` in collections)."""
    team = make_team(org)
    agent = make_agent(org, team=team, expertise=["Tenancy"])
    return {"agent_id": agent.handle, "team": team.name}


def roster_tool_body() -> dict:
    return {"toolName": "get_organization_roster", "params": {"filter": "all"}}


ENDPOINTS = [
    Endpoint("GET", "/api/roster", an_agent, kind=COLLECTION),
    Endpoint("GET", "/api/roster?filter=my_team&agent={agent_id}", an_agent, callers=("org",)),
    Endpoint(
        "POST", "/api/agent-engine/call-tool", an_agent, body=roster_tool_body(), kind=COLLECTION
    ),
    Endpoint("GET", "/api/tools", an_agent, kind=COLLECTION),
]
