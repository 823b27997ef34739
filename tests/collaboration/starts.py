"""Sessions the runner tests start: three reviewers by default, or a hierarchical team."""

from collaboration.services import session_create
from tests.collaboration.conftest import human, specialists


def create(org, **payload):
    payload.setdefault("task", "Should we use microservices or a monolith?")
    payload.setdefault(
        "agents", specialists("security-reviewer", "perf-reviewer", "maint-reviewer")
    )
    return session_create(caller=human(org), payload=payload)


def hierarchical(org, *names, **payload):
    coordinator = {
        "name": names[0],
        "role": "coordinator",
        "focus": "decompose, assign, synthesize",
    }
    return create(
        org, mode="hierarchical", agents=[coordinator, *specialists(*names[1:])], **payload
    )
