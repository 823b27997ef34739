"""Sessions the tests start: three reviewers by default, a hierarchical team, or task "t" for the
agents given."""

from collaboration.services import session_create
from tests.collaboration.conftest import human, specialists


def create(org, **payload):
    payload.setdefault("task", "Should we use microservices or a monolith?")
    payload.setdefault(
        "agents", specialists("security-reviewer", "perf-reviewer", "maint-reviewer")
    )
    return session_create(caller=human(org), payload=payload)


def started(org, agents, caller=None, **payload):
    """A session `org`'s administrator (`caller` if given) starts on task "t" for `agents`; the
    rest of the payload (synthesis, mode, limits) as given."""
    payload = {"task": "t", "agents": agents, **payload}
    return session_create(caller=caller or human(org), payload=payload)


def hierarchical(org, *names, **payload):
    coordinator = {
        "name": names[0],
        "role": "coordinator",
        "focus": "decompose, assign, synthesize",
    }
    return create(
        org, mode="hierarchical", agents=[coordinator, *specialists(*names[1:])], **payload
    )
