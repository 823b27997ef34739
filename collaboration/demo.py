"""The demo organization's finished collaboration, started like any session (as Alice, offline
provider) and run here in-process by the worker's runner; keyed by its task, played once.
"""

import logging

from django.db import transaction

from infrastructure.errors import DomainError
from organization.caller import caller_for_agent
from organization.models import Organization

from .models import CollaborationSession, Mode, Synthesis
from .providers import Provider
from .runner import run_session
from .services import session_create

log = logging.getLogger(__name__)

DEMO_STARTER = "agent-alice"
OFFLINE = {"provider": Provider.OFFLINE}
DEMO_SESSION = {
    "task": "Should the orders service move its reporting queries to a read replica?",
    "agents": [
        {"agent_id": "agent-alex", "focus": "query patterns and the API", "config": OFFLINE},
        {
            "agent_id": "agent-database-lead",
            "focus": "replication lag and operations",
            "config": OFFLINE,
        },
        {
            "agent_id": "agent-jordan",
            "focus": "infrastructure cost and deployment",
            "config": OFFLINE,
        },
    ],
    "mode": Mode.PARALLEL,
    "synthesis": Synthesis.VOTE,
    "coordinator_config": OFFLINE,
    "context": {"source": "seed_demo"},
}


def seed_demo_collaboration(org: Organization) -> CollaborationSession | None:
    """Start and run the demo session unless the organization has it; None if it cannot be made."""
    if CollaborationSession.objects.filter(organization=org, task=DEMO_SESSION["task"]).exists():
        return None
    starter = org.agents.filter(handle=DEMO_STARTER).first()
    if starter is None:
        return None
    try:
        with transaction.atomic():
            session = session_create(caller=caller_for_agent(starter), payload=DEMO_SESSION)
    except DomainError:
        return None  # e.g. one of its agents was paused or removed: no demo session then.
    # Outside the transaction: the runner's agent threads read the committed rows.
    try:
        run_session(session.id)
    except Exception:
        # The start of `make run` must not hang on the demo: its queued message is still there,
        # so the worker runs the session instead.
        log.exception("the demo collaboration could not run here; a worker will run it")
    session.refresh_from_db()
    return session
