"""Claim and lease: one run owns a session at a time, and a re-delivered run resumes it
(`claim` backs off while another run's heartbeat is fresh; `Heartbeat` renews the lease).
"""

import logging
import threading

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from infrastructure.connections import release_connection

from .. import events
from ..models import CollaborationSession, ContributionStatus, SessionStatus
from .context import RunContext
from .finish import session_finish_cancelled

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 1.0

# What run_session did with a delivery of the session task.
CLAIMED, MISSING, FINISHED, BUSY = "claimed", "missing", "finished", "busy"


class Heartbeat(threading.Thread):
    """Renews the session's lease and notices a cancel request while the session runs."""

    def __init__(self, ctx: RunContext, token: str):
        super().__init__(daemon=True, name=f"collab-heartbeat-{str(ctx.session_id)[:8]}")
        self.ctx, self.token = ctx, token
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.wait(HEARTBEAT_SECONDS):
                try:
                    self.beat()
                except Exception:  # a database hiccup must not end the session
                    log.exception("collaboration heartbeat failed")
                    # The connection may be broken (a restart, a failover): the next beat
                    # takes a new one, or the lease would lapse while the run is alive.
                    connection.close()
                release_connection()  # held a moment a second, not for the session's life
                if self.ctx.lease_lost.is_set():
                    return
        finally:
            connection.close()

    def beat(self) -> None:
        qs = CollaborationSession.objects.filter(pk=self.ctx.session_id)
        if not qs.filter(lease_token=self.token).update(heartbeat_at=timezone.now()):
            # Another run took the session over (this one's beats had stopped): stop starting
            # agents, and leave the outcome to that run (finish checks the lease).
            log.warning("collaboration session %s: lease lost", self.ctx.session_id)
            self.ctx.lease_lost.set()
            self.ctx.stop.set()
        elif qs.filter(cancel_requested=True).exists():
            self.ctx.cancelled.set()

    def halt(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def claim(session_id, token: str) -> tuple[str, CollaborationSession | None]:
    """Take the session's lease; returns the outcome and, when CLAIMED, the session as claimed
    (its row read under the lock, so the run needs no second read)."""
    lease = settings.COLLAB_LEASE_SECONDS
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return MISSING, None
        if session.is_finished:
            return FINISHED, None
        if session.cancel_requested:
            session_finish_cancelled(session)
            return FINISHED, None
        now = timezone.now()
        if (
            session.lease_token
            and session.heartbeat_at
            and (now - session.heartbeat_at).total_seconds() < lease
        ):
            return BUSY, None
        first = session.attempts == 0
        session.attempts += 1
        session.lease_token = token
        session.heartbeat_at = now
        session.started_at = session.started_at or now
        if session.status == SessionStatus.QUEUED:
            session.status = SessionStatus.RUNNING
        session.save(
            update_fields=["attempts", "lease_token", "heartbeat_at", "started_at", "status"]
        )
        contributions = session.contributions.order_by("position")
        if first:
            events.session_started_event(
                session.id,
                task=session.task,
                agents=[c.agent_key for c in contributions],
                mode=session.mode,
            )
        else:
            # The previous run died with these agents in flight: their answers never arrived.
            interrupted = list(
                contributions.filter(status=ContributionStatus.RUNNING).values_list(
                    "agent_key", flat=True
                )
            )
            contributions.filter(status=ContributionStatus.RUNNING).update(
                status=ContributionStatus.PENDING, started_at=None
            )
            events.session_resumed_event(session.id, attempt=session.attempts, rerun=interrupted)
    return CLAIMED, session
