"""The session's event log: seed 004's `tool:collaborative:<kind>` events, one function per kind.

Each is appended in the writer's transaction; inside `deferred()` they are returned unsaved for
a writer that inserts them in its own statement.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .models import SessionEvent

PREFIX = "tool:collaborative"

_deferred: ContextVar[list[SessionEvent] | None] = ContextVar("session_events", default=None)


def _record(session_id, kind: str, **data) -> SessionEvent:
    event = SessionEvent(session_id=session_id, name=f"{PREFIX}:{kind}", data=data)
    pending = _deferred.get()
    if pending is None:
        event.save()
    else:
        pending.append(event)
    return event


@contextmanager
def deferred() -> Iterator[list[SessionEvent]]:
    """The events recorded inside, unsaved: the caller writes them."""
    pending: list[SessionEvent] = []
    token = _deferred.set(pending)
    try:
        yield pending
    finally:
        _deferred.reset(token)


# --- the session ---------------------------------------------------------------------------


def session_queued_event(session_id, *, agents: list[str], mode: str, synthesis: str):
    """Accepted at a door; a worker will run it."""
    return _record(session_id, "queued", agents=agents, mode=mode, synthesis=synthesis)


def session_started_event(session_id, *, task: str, agents: list[str], mode: str):
    """The first run of the session began."""
    return _record(session_id, "start", task=task, agents=agents, mode=mode)


def session_resumed_event(session_id, *, attempt: int, rerun: list[str]):
    """A re-delivered run took over; `rerun` were in flight when the previous one died."""
    return _record(session_id, "resume", attempt=attempt, rerun=rerun)


def cancel_requested_event(session_id, *, by: str):
    return _record(session_id, "cancel_requested", by=by)


def session_cancelled_event(session_id):
    return _record(session_id, "cancelled")


def synthesis_started_event(session_id, *, strategy: str):
    return _record(session_id, "synthesis:start", strategy=strategy)


def fallback_event(session_id, *, stage: str, reason: str, action: str):
    """A step fell back to its second best (a rejected plan, a failed coordinator call)."""
    return _record(session_id, "fallback", stage=stage, reason=reason, action=action)


def session_completed_event(session_id, *, status: str, agents_count: int, total_tokens: int):
    """The session's outcome is written (whatever its status)."""
    return _record(
        session_id,
        "complete",
        status=status,
        agents_count=agents_count,
        total_tokens=total_tokens,
    )


# --- one agent -----------------------------------------------------------------------------


def agent_started_event(session_id, *, agent: str, role: str):
    return _record(session_id, "agent:start", agent=agent, role=role)


def agent_completed_event(session_id, *, agent: str, tokens: int):
    return _record(session_id, "agent:complete", agent=agent, tokens=tokens)


def agent_failed_event(session_id, *, agent: str, role: str, status: str, error: str):
    """Failed, timed out or cancelled (`status` says which)."""
    return _record(session_id, "agent:failed", agent=agent, role=role, status=status, error=error)


def agent_skipped_event(session_id, *, agent: str, reason: str):
    return _record(session_id, "agent:skipped", agent=agent, reason=reason)
