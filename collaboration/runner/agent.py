"""Running one agent: claim its contribution, ask its provider, settle the answer once.

A contribution is settled only from running, so a late answer of an agent already timed out or
cancelled changes nothing.
"""

import logging
import time
from collections.abc import Callable
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from costs.budgets import refusal_seen_by
from costs.metering import BudgetExhausted, Meter
from costs.models import UsagePurpose
from organization.prompt import system_prompt_for

from .. import events, providers, sql
from ..models import CollaborationSession, Contribution, ContributionStatus
from ..providers import (
    BudgetRefused,
    LLMReply,
    LLMRequest,
    ProviderError,
    ProviderTimeout,
    Purpose,
)
from ..selectors import may_use_custom_prompt
from ..synthesis import strategy_for
from ..synthesis.parsing import parse_confidence, parse_verdict
from ..synthesis.prompts import agent_prompt
from .acting import AgentFailed, ask_with_tools, tools_of
from .context import RunContext, Slot

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 1024
# At least this many for a coordinator's plan, synthesis or judgement.
SYNTHESIS_MAX_TOKENS = 2048


def start(ctx: RunContext, slot: Slot) -> Contribution | None:
    """Claim the contribution (pending → running); None when it is not ours to run."""
    if ctx.stop.is_set() or ctx.cancelled.is_set():
        return None
    contribution = slot.contribution
    claimed = transition(
        contribution,
        (ContributionStatus.PENDING,),
        {
            "status": ContributionStatus.RUNNING,
            "started_at": timezone.now(),
            "finished_at": None,
            "error": "",
        },
        lambda: events.agent_started_event(
            ctx.session_id, agent=contribution.agent_key, role=contribution.role
        ),
    )
    if not claimed:
        return None
    slot.deadline = time.monotonic() + ctx.session.agent_timeout
    return contribution


def settle(
    ctx: RunContext,
    contribution: Contribution,
    status: str,
    *,
    error: str = "",
    reply: LLMReply | None = None,
    turns: list[dict] | None = None,
    from_statuses=(ContributionStatus.RUNNING,),
    on_settled: Callable[[], None] | None = None,
) -> bool:
    """Finish a contribution once, only from `from_statuses`: a late answer changes nothing.
    `reply` is what it answered or spent (a failed tool loop's tokens count), `turns` its turns."""
    fields = {"status": status, "error": error[:2000], "finished_at": timezone.now()}
    if turns is not None:
        fields["turns"] = turns
    if reply is not None:
        fields.update(
            response=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            tokens_used=reply.tokens_used,
            attempts=reply.attempts,
            provider=reply.provider,
            model=reply.model,
            verdict=parse_verdict(reply.text),
            confidence=parse_confidence(reply.text),
        )

    def record() -> None:
        if status == ContributionStatus.COMPLETED:
            events.agent_completed_event(
                ctx.session_id,
                agent=contribution.agent_key,
                tokens=reply.tokens_used if reply else 0,
            )
        else:
            events.agent_failed_event(
                ctx.session_id,
                agent=contribution.agent_key,
                role=contribution.role,
                status=status,
                error=error[:500],
            )
        if on_settled is not None:
            on_settled()

    settled = transition(
        contribution, from_statuses, fields, record, in_one_statement=not on_settled
    )
    if not settled and reply is not None and reply.tokens_used:
        _book_late_tokens(ctx, contribution, reply)
    return settled


# A contribution ended while its call was still under way: the call's answer comes late.
ENDED_UNDER_WAY = (ContributionStatus.CANCELLED, ContributionStatus.TIMED_OUT)


def _book_late_tokens(ctx: RunContext, contribution: Contribution, reply: LLMReply) -> None:
    """The answer of a call whose contribution was cancelled or timed out meanwhile changes
    nothing but what it spent: the ledger booked it, so the contribution (which counted none)
    and, if it is over already, the session's metadata count it too."""
    tokens = reply.tokens_used
    with transaction.atomic():
        booked = Contribution.objects.filter(
            pk=contribution.pk, status__in=ENDED_UNDER_WAY, tokens_used=0
        ).update(
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            tokens_used=tokens,
        )
        if not booked:
            return
        session = CollaborationSession.objects.select_for_update().get(pk=ctx.session_id)
        if session.is_finished and "total_tokens" in session.metadata:
            metadata = session.metadata
            for key in ("agent_tokens", "total_tokens"):
                metadata[key] = int(metadata.get(key, 0)) + tokens
            session.save(update_fields=["metadata"])


def transition(
    contribution: Contribution,
    from_statuses,
    fields: dict,
    record: Callable[[], None],
    *,
    in_one_statement: bool = True,
) -> bool:
    """Update the contribution if its status is one of `from_statuses` and, if it was, run
    `record` (its event): both or neither; the object takes the new values. Returns whether it
    was updated (on PostgreSQL in one statement, see sql.update_contribution_recording)."""
    if not (in_one_statement and sql.may_run_in_one_statement()):
        with transaction.atomic():
            updated = Contribution.objects.filter(
                pk=contribution.pk, status__in=from_statuses
            ).update(**fields)
            if updated:
                record()
    else:
        with events.deferred() as recorded:
            record()
        updated = sql.update_contribution_recording(
            contribution.pk, from_statuses, fields, recorded
        )
    if updated:
        # The object mirrors its row (a sequential brief reads the answers before it from it).
        for name, value in fields.items():
            setattr(contribution, name, value)
    return bool(updated)


def coordinator_model_for(provider: str) -> str:
    """COLLAB_COORDINATOR_MODEL on the default provider (as LLM_MODEL is the agents'), else the
    provider's default model."""
    if settings.COLLAB_COORDINATOR_MODEL and provider == providers.default_provider_name():
        return settings.COLLAB_COORDINATOR_MODEL
    return providers.default_model_for(provider)


def llm_settings(
    contribution: Contribution, *, coordinator: bool = False
) -> tuple[str, str, float | None, int]:
    """Provider, model, temperature and max_tokens: session config, then the agent's own, then
    defaults (a coordinating agent's default model is the coordinator's)."""
    config, agent = contribution.config or {}, contribution.agent
    provider = (
        config.get("provider")
        or (agent.llm_provider if agent else "")
        or providers.default_provider_name()
    )
    model = config.get("model")
    if not model and agent and agent.llm_model:
        agent_provider = agent.llm_provider or providers.default_provider_name()
        model = agent.llm_model if agent_provider == provider else None
    default_model = coordinator_model_for if coordinator else providers.default_model_for
    model = model or default_model(provider)
    temperature = config.get("temperature")
    if temperature is None and agent is not None:
        temperature = agent.llm_temperature
    max_tokens = config.get("max_tokens") or (agent.llm_max_tokens if agent else None)
    return provider, model, temperature, max_tokens or DEFAULT_MAX_TOKENS


def synthesis_settings(
    config: dict, coordinating: Contribution | None
) -> tuple[str, str, float | None, int]:
    """The synthesis call's provider, model, temperature and max tokens: the session's
    coordinator_config, else (hierarchical) the coordinating agent's, else the defaults. The
    run and the up-front estimate (collaboration/estimate.py) both read them here."""
    if not config and coordinating is not None:
        provider, model, temperature, max_tokens = llm_settings(coordinating, coordinator=True)
        return provider, model, temperature, max(max_tokens, SYNTHESIS_MAX_TOKENS)
    provider = config.get("provider") or providers.default_provider_name()
    model = config.get("model") or coordinator_model_for(provider)
    temperature = config.get("temperature", settings.COLLAB_COORDINATOR_TEMPERATURE)
    return provider, model, temperature, config.get("max_tokens") or SYNTHESIS_MAX_TOKENS


def system_prompt(session: CollaborationSession, contribution: Contribution) -> str:
    """An org agent's prompt (its custom prompt if the starter may read it + organizational
    context); an ad-hoc one's config."""
    agent = contribution.agent
    if agent is not None:
        expertise = ", ".join(agent.expertise) or "(none listed)"
        custom = may_use_custom_prompt(session, agent)
        return (
            f"{system_prompt_for(agent, include_custom=custom)}\n## THIS COLLABORATIVE SESSION\n\n"
            f"You are {agent.name} ({agent.role or 'no job title'}), taking part as the "
            f"{contribution.role} specialist. Your expertise: {expertise}.\n"
        )
    custom = (contribution.config or {}).get("system_prompt")
    return custom or (
        f"You are {contribution.display_name or contribution.agent_key}, a {contribution.role} "
        "specialist taking part in a collaborative session with other specialists."
    )


# What a call of each purpose is for, in the ledger (costs.models.UsagePurpose).
LEDGER_PURPOSES = {
    Purpose.AGENT: UsagePurpose.COLLABORATION,
    Purpose.PLAN: UsagePurpose.PLAN,
    Purpose.SYNTHESIS: UsagePurpose.SYNTHESIS,
    Purpose.JUDGE: UsagePurpose.JUDGE,
}


def call(ctx: RunContext, provider: str, request: LLMRequest, agent=None) -> LLMReply:
    """One model call of the session, as `agent` (None: the session's coordinator), through the
    ledger: the session's token limit first, then its budgets (max_cost_usd and the monthly ones
    covering the agent)."""
    budget = ctx.budget_left()
    if budget <= 0:
        raise ProviderError(
            f"token budget exhausted ({ctx.session.max_total_tokens} tokens for this session)"
        )
    request.max_tokens = max(1, min(request.max_tokens, budget))
    meter = Meter.for_agent(
        agent,
        LEDGER_PURPOSES.get(request.purpose, UsagePurpose.COLLABORATION),
        organization_id=ctx.session.organization_id,
        session_id=ctx.session_id,
        label=request.label,
    )
    with ctx.track():
        try:
            reply = providers.complete(provider, request, meter=meter)
        except BudgetRefused as exc:
            # The error is stored on the session, which its starter reads: a colleague's budget
            # is not the starter's to read (the estimate hides it too).
            if isinstance(refusal := exc.__cause__, BudgetExhausted):
                seen = refusal_seen_by(ctx.session.created_by_agent, refusal)
                if seen != refusal.message:
                    raise BudgetRefused(seen) from refusal
            raise
    ctx.spend(reply.tokens_used)
    return reply


def run_agent(ctx: RunContext, slot: Slot) -> None:
    try:
        contribution = start(ctx, slot)
        if contribution is None:
            return
        session = ctx.session
        brief = ctx.mode.brief(ctx, contribution)
        provider, model, temperature, max_tokens = llm_settings(contribution)
        request = LLMRequest(
            system=system_prompt(session, contribution),
            prompt=agent_prompt(
                task=session.task,
                role=contribution.role,
                focus=contribution.focus,
                context=session.context,
                previous=brief.previous,
                ask_verdict=strategy_for(session.synthesis).asks_verdict,
                subtask=brief.subtask,
                whole_task_note=brief.note,
            ),
            model=model,
            temperature=temperature,
            max_tokens=max_tokens,
            deadline=slot.deadline,
            purpose=Purpose.AGENT,
            label=contribution.agent_key,
            hints={
                "task": brief.subtask or session.task,
                "focus": contribution.focus,
                "role": contribution.role,
            },
        )
        turns = None
        if tools_of(contribution):
            reply, turns = ask_with_tools(
                ctx,
                slot,
                provider,
                request,
                complete=partial(call, ctx, provider, agent=contribution.agent),
            )
        else:
            reply = call(ctx, provider, request, agent=contribution.agent)
        settle(ctx, slot.contribution, ContributionStatus.COMPLETED, reply=reply, turns=turns)
    except Exception as exc:
        settle_failure(ctx, slot, exc)


def internal_error(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


def settle_failure(ctx: RunContext, slot: Slot, exc: BaseException) -> None:
    """An agent's call ended in `exc`: timed out, failed at the provider or in its tool loop,
    or a bug (logged). A failed tool loop keeps its turns and the tokens it spent."""
    if isinstance(exc, ProviderTimeout) or getattr(exc, "timed_out", False):
        status, error = ContributionStatus.TIMED_OUT, str(exc)
    elif isinstance(exc, ProviderError | AgentFailed):
        status, error = ContributionStatus.FAILED, str(exc)
    else:
        log.exception("collaboration agent %s crashed", slot.contribution.agent_key)
        status, error = ContributionStatus.FAILED, internal_error(exc)
    reply, turns = getattr(exc, "reply", None), getattr(exc, "turns", None)
    settle(ctx, slot.contribution, status, error=error, reply=reply, turns=turns)
