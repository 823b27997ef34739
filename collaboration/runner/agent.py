"""Running one agent: claim its contribution, ask its provider, settle the answer once.

`start` claims a contribution (pending → running) and starts its clock; `settle` finishes it
only from running, so a late answer of an agent already timed out or cancelled changes nothing.
The provider, model and prompt of an agent come from the session's config, then the agent's own
settings, then the server's defaults; the session's mode says what else the agent is told.
"""

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from organization.prompt import system_prompt_for

from .. import events, providers
from ..models import CollaborationSession, Contribution, ContributionStatus
from ..providers import LLMReply, LLMRequest, ProviderError, ProviderTimeout, Purpose
from ..selectors import may_use_custom_prompt
from ..synthesis import strategy_for
from ..synthesis.parsing import parse_confidence, parse_verdict
from ..synthesis.prompts import agent_prompt
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
    claimed = Contribution.objects.filter(
        pk=contribution.pk, status=ContributionStatus.PENDING
    ).update(
        status=ContributionStatus.RUNNING, started_at=timezone.now(), finished_at=None, error=""
    )
    if not claimed:
        return None
    slot.deadline = time.monotonic() + ctx.session.agent_timeout
    events.agent_started_event(ctx.session_id, agent=contribution.agent_key, role=contribution.role)
    return contribution


def settle(
    ctx: RunContext,
    contribution: Contribution,
    status: str,
    *,
    error: str = "",
    reply: LLMReply | None = None,
    from_statuses=(ContributionStatus.RUNNING,),
    on_settled: Callable[[], None] | None = None,
) -> bool:
    """Finish a contribution once: only from `from_statuses`, so a late answer changes nothing."""
    fields = {"status": status, "error": error[:2000], "finished_at": timezone.now()}
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
    with transaction.atomic():
        settled = Contribution.objects.filter(pk=contribution.pk, status__in=from_statuses).update(
            **fields
        )
        if not settled:
            return False
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
    return True


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


def call(ctx: RunContext, provider: str, request: LLMRequest) -> LLMReply:
    budget = ctx.budget_left()
    if budget <= 0:
        raise ProviderError(
            f"token budget exhausted ({ctx.session.max_total_tokens} tokens for this session)"
        )
    request.max_tokens = max(1, min(request.max_tokens, budget))
    with ctx.track():
        reply = providers.complete(provider, request)
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
        reply = call(ctx, provider, request)
        settle(ctx, slot.contribution, ContributionStatus.COMPLETED, reply=reply)
    except Exception as exc:
        settle_failure(ctx, slot, exc)


def internal_error(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


def settle_failure(ctx: RunContext, slot: Slot, exc: BaseException) -> None:
    """An agent's call ended in `exc`: timed out, failed at the provider, or a bug (logged)."""
    if isinstance(exc, ProviderTimeout):
        status, error = ContributionStatus.TIMED_OUT, str(exc)
    elif isinstance(exc, ProviderError):
        status, error = ContributionStatus.FAILED, str(exc)
    else:
        log.exception("collaboration agent %s crashed", slot.contribution.agent_key)
        status, error = ContributionStatus.FAILED, internal_error(exc)
    settle(ctx, slot.contribution, status, error=error)
