"""The hierarchical plan: the coordinator gives each specialist a subtask (asked again once if
malformed, else every specialist gets the whole task), written in the coordinator's settle.
"""

import time

from django.db import transaction
from django.utils import timezone

from .. import events
from ..models import CollaborationSession, Contribution, ContributionStatus
from ..providers import LLMReply, LLMRequest, ProviderError, Purpose
from ..synthesis.parsing import parse_plan, plan_text
from ..synthesis.prompts import plan_prompt
from .agent import (
    SYNTHESIS_MAX_TOKENS,
    call,
    llm_settings,
    settle,
    settle_failure,
    start,
    system_prompt,
)
from .context import RunContext, Slot


def session_metadata(ctx: RunContext) -> dict:
    return (
        CollaborationSession.objects.filter(pk=ctx.session_id)
        .values_list("metadata", flat=True)
        .first()
        or {}
    )


def _merge_metadata(session_id, **values) -> None:
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().get(pk=session_id)
        session.metadata = {**session.metadata, **values}
        session.save(update_fields=["metadata"])


def run_plan(ctx: RunContext, slot: Slot) -> None:
    """The coordinator's JSON plan: validated, retried once, else every specialist gets the task."""
    try:
        coordinator = start(ctx, slot)
        if coordinator is None:
            return
        session = ctx.session
        specialists = list(
            Contribution.objects.filter(session=session, position__gt=0).order_by("position")
        )
        names = [s.agent_key for s in specialists]
        roster = [{"name": s.agent_key, "role": s.role, "focus": s.focus} for s in specialists]
        provider, model, temperature, max_tokens = llm_settings(coordinator, coordinator=True)
        replies: list[LLMReply] = []
        plan, why, failure = None, "", None
        for attempt in (1, 2):
            if attempt == 2:
                if not _may_ask_again(ctx, coordinator):
                    # Cancelled, timed out or taken over while it answered: no second call
                    # (a cancel keeps what the first one spent).
                    if ctx.cancelled.is_set():
                        settle(
                            ctx,
                            slot.contribution,
                            ContributionStatus.CANCELLED,
                            error="cancelled",
                            reply=_combined(replies, None),
                        )
                    return
                slot.deadline = time.monotonic() + session.agent_timeout
            request = LLMRequest(
                system=system_prompt(session, coordinator),
                prompt=plan_prompt(
                    task=session.task,
                    context=session.context,
                    specialists=roster,
                    focus=coordinator.focus,
                    error=why,
                ),
                model=model,
                temperature=temperature,
                max_tokens=max(max_tokens, SYNTHESIS_MAX_TOKENS),
                deadline=slot.deadline,
                purpose=Purpose.PLAN,
                label=coordinator.agent_key,
                hints={"task": session.task, "specialists": roster},
            )
            try:
                replies.append(call(ctx, provider, request, agent=coordinator.agent))
            except ProviderError as exc:
                failure = exc
                break
            plan, why = parse_plan(replies[-1].text, names)
            if plan is not None:
                break
        if not replies:
            settle_failure(ctx, slot, failure)
            return
        combined = _combined(replies, plan)
        reason = why or (str(failure) if failure else "")
        outcome = {
            "valid": plan is not None,
            "tries": len(replies),
            "fallback": plan is None,
            "reason": reason,
            "plan": plan["plan"] if plan else "",
            "assignments": plan["assignments"] if plan else {},
            "unassigned": [n for n in names if n not in plan["assignments"]] if plan else names,
        }

        def record_plan():
            # In the coordinator's settle transaction: a re-delivery finds both or neither.
            for s in specialists:
                Contribution.objects.filter(pk=s.pk).update(
                    subtask=(plan or {}).get("assignments", {}).get(s.agent_key, "")
                )
            if plan:
                _skip_unassigned(ctx, outcome["unassigned"])
            _record_plan(ctx, outcome)

        settle(
            ctx,
            slot.contribution,
            ContributionStatus.COMPLETED,
            reply=combined,
            error="" if plan else f"plan rejected: {reason}",
            on_settled=record_plan,
        )
    except Exception as exc:
        settle_failure(ctx, slot, exc)


def _combined(replies: list[LLMReply], plan: dict | None) -> LLMReply:
    """The coordinator's answer over its tries: every try's tokens and attempts."""
    return LLMReply(
        # Seed 004: the coordinator's contribution is its plan; the raw answer stays only
        # when it was rejected (it is what the coordinator said).
        text=plan_text(plan) if plan else replies[-1].text,
        prompt_tokens=sum(r.prompt_tokens for r in replies),
        completion_tokens=sum(r.completion_tokens for r in replies),
        attempts=sum(r.attempts for r in replies),
        provider=replies[-1].provider,
        model=replies[-1].model,
    )


def _may_ask_again(ctx: RunContext, coordinator: Contribution) -> bool:
    """Whether a rejected plan may be asked for again: the run goes on, the session is not
    cancelled, and the coordinator is still running (not timed out or cancelled meanwhile)."""
    if ctx.stop.is_set() or ctx.cancel_seen():
        return False
    return Contribution.objects.filter(
        pk=coordinator.pk, status=ContributionStatus.RUNNING
    ).exists()


def _skip_unassigned(ctx: RunContext, names: list[str]) -> None:
    """Seed 004 runs only the specialists the plan assigns: the others are `skipped`."""
    for name in names:
        skipped = Contribution.objects.filter(
            session_id=ctx.session_id, agent_key=name, status=ContributionStatus.PENDING
        ).update(
            status=ContributionStatus.SKIPPED,
            error="not assigned by the coordinator's plan",
            finished_at=timezone.now(),
        )
        if skipped:
            events.agent_skipped_event(ctx.session_id, agent=name, reason="not in the plan")


def ensure_plan_outcome(ctx: RunContext, coordinator: Contribution) -> None:
    """A coordinator that failed or timed out leaves no plan: record the fallback once."""
    if "plan" in session_metadata(ctx):
        return
    coordinator.refresh_from_db(fields=["status", "error"])
    if coordinator.status in (
        ContributionStatus.PENDING,
        ContributionStatus.RUNNING,
        ContributionStatus.CANCELLED,
    ):
        return  # cancelled before the coordinator finished: no specialist runs
    reason = f"the coordinator {coordinator.status}: {coordinator.error}".strip(": ")
    _record_plan(
        ctx,
        {
            "valid": False,
            "tries": 0,
            "fallback": True,
            "reason": reason,
            "plan": "",
            "assignments": {},
            "unassigned": [],
        },
    )


def _record_plan(ctx: RunContext, outcome: dict) -> None:
    """metadata.plan, and the `fallback` event when the specialists get the whole task."""
    _merge_metadata(ctx.session_id, plan=outcome)
    if outcome["fallback"]:
        events.fallback_event(
            ctx.session_id,
            stage=Purpose.PLAN,
            reason=outcome["reason"],
            action="every specialist gets the whole task",
        )
