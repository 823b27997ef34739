"""Rows of the tenancy table (tests/tenancy.py) for every collaboration endpoint."""

from collaboration.models import CollaborationSession, Contribution
from tests.factories import make_agent
from tests.tenancy import COLLECTION, Endpoint


def a_session(org):
    """A queued session of `org` with one of its agents; returns its id and distinctive markers."""
    agent = make_agent(org, f"agent-collab-{org.slug}")
    session = CollaborationSession.objects.create(
        organization=org,
        created_by=f"org-key:{org.slug}",
        task=f"collaboration task of {org.slug}",
        max_parallel=3,
        agent_timeout=300,
        max_total_tokens=1000,
    )
    Contribution.objects.create(
        session=session, position=0, agent_key=agent.handle, agent=agent, role="specialist"
    )
    return {"session_id": str(session.pk), "task": session.task}


def an_agent(org):
    agent = make_agent(org, f"agent-helper-{org.slug}")
    return {"agent_id": agent.handle}


ENDPOINTS = [
    Endpoint("GET", "/api/collaborations/{session_id}", a_session),
    Endpoint("POST", "/api/collaborations/{session_id}/cancel", a_session, body={}),
    Endpoint("GET", "/api/collaborations", a_session, kind=COLLECTION),
    # Naming another organization's agent must look exactly like naming no agent at all.
    Endpoint(
        "POST",
        "/api/collaborations",
        an_agent,
        body={"task": "t", "agents": [{"agent_id": "{agent_id}"}]},
    ),
]
