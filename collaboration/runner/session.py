"""A session's run from the worker's side: claim it, run its mode, synthesize, finish."""

import logging
import uuid

from django.db import transaction

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
    ctx = RunContext(session=session)
    ctx.load_tokens()
    heartbeat = Heartbeat(ctx, token)
    heartbeat.start()
    session_started()
    try:
        execute(ctx)
    except Exception as exc:
        # acks_late would otherwise ack a crashed run and leave the session "running" forever.
        log.exception("collaboration session %s crashed", session_id)
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


def execute(ctx: RunContext) -> None:
    session = ctx.session
    contributions = list(session.contributions.select_related("agent").order_by("position"))
    ctx.contributions = contributions
    ctx.mode = mode_for(session.mode)
    ctx.mode.run(ctx, contributions)
    if ctx.cancelled.is_set():
        with transaction.atomic():
            locked = CollaborationSession.objects.select_for_update().get(pk=session.pk)
            if not locked.is_finished:
                session_finish_cancelled(locked)
        return
    synthesize_and_finish(ctx)
