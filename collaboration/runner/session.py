"""A session's run from the worker's side: claim it, run its mode, synthesize, finish."""

import logging
import uuid

from django.conf import settings
from django.db import connection, transaction

from infrastructure import tracing
from infrastructure.atomic import DATABASE_GONE, once_reconnected

from ..models import CollaborationSession, SessionStatus
from .agent import internal_error
from .context import RunContext
from .finish import finish, session_finish_cancelled, synthesize_and_finish
from .lease import CLAIMED, Heartbeat, claim
from .modes import mode_for
from .pool import session_ended, session_started

log = logging.getLogger(__name__)


def run_session(session_id) -> str:
    """Run (or resume) the session; returns claimed/missing/finished/busy."""
    token = uuid.uuid4().hex
    outcome, session = claim(session_id, token)
    if outcome != CLAIMED:
        return outcome
    ctx = RunContext(session=session, token=token)
    ctx.load_tokens()
    heartbeat = Heartbeat(ctx, token)
    heartbeat.start()
    session_started()
    try:
        if session.attempts > settings.COLLAB_MAX_ATTEMPTS:
            give_up(ctx)
        else:
            with tracing.invoke_workflow(session):
                execute(ctx)
    except DATABASE_GONE:
        # The database went away under the run (a restart, a failover): the session is not
        # at fault. Its lease is handed back and the error raised, so that the task runs it
        # again, resuming it (the agents that had answered keep their answers).
        log.exception("collaboration session %s lost its database; it will resume", session_id)
        ctx.stop.set()
        heartbeat.halt()
        released = CollaborationSession.objects.filter(pk=session_id, lease_token=token)
        once_reconnected(lambda: released.update(lease_token=""))
        raise
    except Exception as exc:
        # acks_late would otherwise ack a crashed run and leave the session "running" forever.
        log.exception("collaboration session %s crashed", session_id)
        connection.close()  # it may be what broke
        finish(
            ctx,
            status=SessionStatus.FAILED,
            result="",
            error=internal_error(exc),
        )
    finally:
        ctx.stop.set()
        heartbeat.halt()
        session_ended()
    return CLAIMED


def give_up(ctx: RunContext) -> None:
    """The session was started COLLAB_MAX_ATTEMPTS times and never finished: whatever stops it
    (a crash that kills its worker, the time limit) would stop it again. It fails, saying so."""
    error = (
        f"Given up after {ctx.session.attempts - 1} starts that did not finish: its worker "
        "crashed, was killed or reached COLLAB_SESSION_TIME_LIMIT each time (COLLAB_MAX_ATTEMPTS)."
    )
    log.error("collaboration session %s: %s", ctx.session_id, error)
    finish(ctx, status=SessionStatus.FAILED, result="", error=error)


def execute(ctx: RunContext) -> None:
    session = ctx.session
    contributions = list(session.contributions.select_related("agent").order_by("position"))
    ctx.contributions = contributions
    ctx.mode = mode_for(session.mode)
    ctx.mode.run(ctx, contributions)
    if ctx.lease_lost.is_set():
        return  # the run that took the session over synthesizes and finishes it
    if ctx.cancelled.is_set():
        with transaction.atomic():
            locked = CollaborationSession.objects.select_for_update().get(pk=session.pk)
            if not locked.is_finished:
                session_finish_cancelled(locked)
        return
    synthesize_and_finish(ctx)
