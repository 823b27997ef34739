"""Runs one collaborative session on a Celery worker: agents, hierarchical plan, synthesis.

One task owns the session (threads for the agents, a lease against a second copy); a
re-delivered task resumes it. docs/collaboration.md says why and where each part is.
"""

from .lease import BUSY, CLAIMED, FINISHED, MISSING
from .pool import close_thread_connections
from .session import run_session

__all__ = ["BUSY", "CLAIMED", "FINISHED", "MISSING", "close_thread_connections", "run_session"]
