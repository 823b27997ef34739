"""Tenancy table of the routines endpoints (contract: tests/tenancy.py)."""

from routines.services import routine_create
from tests.factories import make_agent, make_team
from tests.tenancy import COLLECTION, SIGNATURE, Endpoint


def a_routine(org) -> dict:
    """A team with an agent, and a routine the team owns."""
    team = make_team(org, f"Reviewers of {org.slug}")
    agent = make_agent(org, f"agent-reviewer-{org.slug}", team=team, expertise=["Go"])
    routine, _ = routine_create(
        organization=org,
        title=f"routine of {org.slug}",
        team=team.name,
        required_expertise="Go",
        cron="0 9 * * 1",
    )
    return {"routine_id": routine.pk, "title": routine.title, "agent_id": agent.handle}


BODY = {"title": "t", "agent": "{agent_id}", "interval_seconds": 60}

ENDPOINTS = [
    Endpoint("GET", "/api/routines", a_routine, kind=COLLECTION),
    # Another organization's agent as the owner: 404, no routine made.
    Endpoint("POST", "/api/routines", a_routine, body=BODY, callers=("org",)),
    Endpoint("GET", "/api/routines/{routine_id}", a_routine),
    Endpoint("PATCH", "/api/routines/{routine_id}", a_routine, body={"enabled": False}),
    Endpoint("DELETE", "/api/routines/{routine_id}", a_routine),
    Endpoint("GET", "/api/routines/{routine_id}/occurrences", a_routine),
    Endpoint("POST", "/api/routines/{routine_id}/run", a_routine),
    # No key: the routine's signature is the credential; any key, of any organization, is none.
    Endpoint("POST", "/api/routines/{routine_id}/trigger", a_routine, body={}, auth=SIGNATURE),
]
