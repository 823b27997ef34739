"""How a session ends: its answers synthesized by its strategy, failed, or cancelled; the outcome
and the `complete` event are written once, whichever run gets there first.
"""

import time
from functools import partial

from django.db import transaction
from django.utils import timezone

from .. import events
from ..models import COORDINATOR_ROLE, CollaborationSession, ContributionStatus, SessionStatus
from ..providers import LLMRequest
from ..synthesis import strategy_for
from ..synthesis.base import Ballot, answers_of
from ..synthesis.consensus import consensus_of
from .agent import call, synthesis_settings
from .context import RunContext
from .modes import mode_for


def _coordinator_settings(session: CollaborationSession) -> tuple[str, str, float | None, int]:
    """coordinator_config, else (hierarchical) the coordinating agent's settings, else defaults."""
    config = session.coordinator_config or {}
    coordinating = None if config else mode_for(session.mode).coordinator_of(session)
    return synthesis_settings(config, coordinating)


COORDINATOR_SYSTEM_PROMPT = (
    "You are the coordinator of a collaborative session of specialist agents."
)


def coordinator_system_prompt(config: dict | None) -> str:
    """coordinator_config's system_prompt (the starter's, as an ad-hoc agent's), else ours."""
    return (config or {}).get("system_prompt") or COORDINATOR_SYSTEM_PROMPT


def _coordinator_call(ctx: RunContext, purpose: str, prompt: str, hints: dict) -> str:
    session = ctx.session
    provider, model, temperature, max_tokens = _coordinator_settings(session)
    deadline = time.monotonic() + session.agent_timeout
    request = LLMRequest(
        system=coordinator_system_prompt(session.coordinator_config),
        prompt=prompt,
        model=model,
        temperature=temperature,
        max_tokens=max_tokens,
        deadline=deadline,
        purpose=purpose,
        label=COORDINATOR_ROLE,
        hints=hints,
    )
    # The SDK call runs in this thread: the transport clamps every attempt to the deadline.
    reply = call(ctx, provider, request)
    _add_synthesis_tokens(ctx.session_id, reply.tokens_used)
    return reply.text


def _add_synthesis_tokens(session_id, tokens: int) -> None:
    """Count a coordinator call's tokens under the session's lock (two runs of a resumed session
    may both synthesize); if the other run has already finished the session, its total grows too."""
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().get(pk=session_id)
        metadata = dict(session.metadata)
        metadata["synthesis_tokens"] = int(metadata.get("synthesis_tokens", 0)) + tokens
        if session.is_finished:
            metadata["total_tokens"] = int(metadata.get("total_tokens", 0)) + tokens
        session.metadata = metadata
        session.save(update_fields=["metadata"])


def synthesize_and_finish(ctx: RunContext) -> None:
    session = ctx.session  # as claimed: what the synthesis reads of it does not change
    # Read again: a hierarchical run settles specialists it read itself.
    contributions = list(session.contributions.order_by("position"))
    considered = mode_for(session.mode).answering(contributions)
    answers = answers_of(c for c in considered if c.status == ContributionStatus.COMPLETED)
    # A specialist the plan left out did not fail: it was not needed.
    failures = [
        f"{c.agent_key}: {c.error or c.status}"
        for c in contributions
        if c.status not in (ContributionStatus.COMPLETED, ContributionStatus.SKIPPED)
    ]
    if not answers:
        reasons = "; ".join(failures)
        finish(ctx, status=SessionStatus.FAILED, result="", error=f"every agent failed — {reasons}")
        return
    ours = CollaborationSession.objects.filter(
        pk=session.pk, status__in=[SessionStatus.RUNNING, SessionStatus.SYNTHESIZING]
    )
    if ctx.token:
        ours = ours.filter(lease_token=ctx.token)
    # A cancel accepted since the heartbeat last looked (once a second) ends the session here,
    # before the synthesis spends anything.
    if not ours.filter(cancel_requested=False).update(status=SessionStatus.SYNTHESIZING):
        finish_cancelled(ctx)
        return  # cancelled, finished meanwhile, or another run took the session over
    events.synthesis_started_event(session.pk, strategy=session.synthesis)
    consensus = consensus_of(answers)
    outcome = strategy_for(session.synthesis).combine(
        Ballot(
            task=session.task,
            answers=answers,
            consensus=consensus,
            ask_coordinator=partial(_coordinator_call, ctx),
            coordinator_configured=bool(session.coordinator_config),
        )
    )
    for fallback in outcome.fallbacks:
        events.fallback_event(session.pk, **fallback)
    degraded = outcome.degraded
    status = SessionStatus.PARTIAL if failures or degraded else SessionStatus.COMPLETED
    error = "; ".join(failures + ([degraded] if degraded else []))
    finish(
        ctx,
        status=status,
        result=outcome.result,
        error=error,
        consensus=consensus,
        extra=outcome.extra,
        contributions=contributions,
    )


def finish(
    ctx: RunContext,
    *,
    status: str,
    result: str,
    error: str = "",
    consensus: dict | None = None,
    extra: dict | None = None,
    contributions: list | None = None,
) -> None:
    """Write the outcome and the `complete` event once, by the run that holds the lease; a cancel
    accepted meanwhile wins. `contributions`: as the synthesis read them (else they are read)."""
    with transaction.atomic():
        session = _locked_if_ours(ctx)
        if session is None:
            return
        now = timezone.now()
        if contributions is None:
            contributions = list(session.contributions.order_by("position"))
        metadata = {
            **session.metadata,
            **_spent(session, contributions, now),
            "attempts": session.attempts,
            "peak_parallel": max(int(session.metadata.get("peak_parallel", 0)), ctx.peak),
            "limits": {
                "max_parallel": session.max_parallel,
                "agent_timeout": session.agent_timeout,
                "max_total_tokens": session.max_total_tokens,
            },
            **(extra or {}),
        }
        session.status = status
        session.result = result
        session.error = error[:5000]
        session.consensus = consensus or consensus_of([])
        session.metadata = metadata
        session.finished_at = now
        session.save(
            update_fields=["status", "result", "error", "consensus", "metadata", "finished_at"]
        )
        events.session_completed_event(
            session.pk,
            status=status,
            agents_count=len(contributions),
            total_tokens=metadata["total_tokens"],
        )


def _spent(session: CollaborationSession, contributions: list, now) -> dict:
    """The metadata every finished session carries, whatever its outcome: its agents, what
    they and the coordinator spent, how long it took."""
    agent_tokens = sum(c.tokens_used for c in contributions)
    synthesis_tokens = int(session.metadata.get("synthesis_tokens", 0))
    return {
        "agents_count": len(contributions),
        "mode": session.mode,
        "synthesis": session.synthesis,
        "total_tokens": agent_tokens + synthesis_tokens,
        "agent_tokens": agent_tokens,
        "synthesis_tokens": synthesis_tokens,
        "duration_ms": (
            int((now - session.started_at).total_seconds() * 1000) if session.started_at else 0
        ),
        "agent_durations_ms": {c.agent_key: c.duration_ms for c in contributions},
        "agents_completed": sum(c.status == ContributionStatus.COMPLETED for c in contributions),
    }


def _locked_if_ours(ctx: RunContext) -> CollaborationSession | None:
    """The session, locked, while this run holds it and it is not finished; a cancel requested
    meanwhile ends it cancelled here (None then too)."""
    session = CollaborationSession.objects.select_for_update().get(pk=ctx.session_id)
    if session.is_finished or (ctx.token and session.lease_token != ctx.token):
        return None
    if session.cancel_requested:
        session_finish_cancelled(session)
        return None
    return session


def finish_cancelled(ctx: RunContext) -> None:
    """End the session cancelled if its cancel was requested, by the run that holds the lease."""
    with transaction.atomic():
        _locked_if_ours(ctx)


def session_finish_cancelled(session: CollaborationSession) -> None:
    """Mark a session (locked by the caller) and its unfinished contributions cancelled."""
    now = timezone.now()
    session.contributions.filter(
        status__in=[ContributionStatus.PENDING, ContributionStatus.RUNNING]
    ).update(status=ContributionStatus.CANCELLED, error="cancelled", finished_at=now)
    session.status = SessionStatus.CANCELLED
    session.finished_at = now
    # What it spent before the cancel (a cancelled session's metadata counts it too).
    session.metadata = {
        **session.metadata,
        **_spent(session, list(session.contributions.order_by("position")), now),
    }
    session.save(update_fields=["status", "finished_at", "metadata"])
    events.session_cancelled_event(session.id)
