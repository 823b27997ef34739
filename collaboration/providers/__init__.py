"""LLM providers: `openai` and `anthropic` through their SDKs, and a deterministic `offline`.

`PROVIDERS` is the registry, one entry a provider; the SDKs read API keys from the environment."""

import json
import os
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings

from infrastructure import tracing

from .base import (
    BudgetRefused,
    LLMReply,
    LLMRequest,
    Message,
    Provider,
    ProviderError,
    ProviderTimeout,
    Purpose,
    Role,
    StopReason,
    ToolCall,
    ToolSpec,
)

__all__ = [
    "FREE",
    "PROVIDERS",
    "SDK_KEYS",
    "BudgetRefused",
    "LLMReply",
    "LLMRequest",
    "Message",
    "Provider",
    "ProviderEntry",
    "ProviderError",
    "ProviderTimeout",
    "Purpose",
    "Role",
    "StopReason",
    "ToolCall",
    "ToolSpec",
    "complete",
    "default_model_for",
    "default_provider_name",
    "warm_up",
]

# The price id of a provider whose calls cost nothing (costs.pricing).
FREE = "free"


@dataclass(frozen=True)
class ProviderEntry:
    """A provider: the module that runs its calls (imported on first use: an SDK takes seconds),
    its key's environment variable (none: it needs no key), its default model and its price id
    (genai-prices' provider id, or FREE)."""

    module: str
    default_model: str
    price_id: str
    key: str = ""

    def __str__(self) -> str:
        # How a choice shows it (the serializers offer PROVIDERS as choices): its module.
        return self.module


# The registry (in the order of the Provider enum). Adding a provider: a module and an entry.
PROVIDERS: dict[str, ProviderEntry] = {
    Provider.OFFLINE: ProviderEntry(
        "collaboration.providers.offline", default_model="offline", price_id=FREE
    ),
    Provider.OPENAI: ProviderEntry(
        "collaboration.providers.openai",
        default_model="gpt-4o-mini",
        price_id="openai",
        key="OPENAI_API_KEY",
    ),
    Provider.ANTHROPIC: ProviderEntry(
        "collaboration.providers.anthropic",
        default_model="claude-sonnet-4-5",
        price_id="anthropic",
        key="ANTHROPIC_API_KEY",
    ),
}

# The providers that speak to a model through an SDK, and their key's environment variable, in
# the order the default provider is chosen.
SDK_KEYS = {name: entry.key for name, entry in PROVIDERS.items() if entry.key}


def default_provider_name() -> str:
    """`LLM_PROVIDER`, else the first SDK provider whose key is set (SDK_KEYS), else offline."""
    if settings.LLM_PROVIDER:
        return settings.LLM_PROVIDER
    for provider, key in SDK_KEYS.items():
        if os.environ.get(key):
            return provider
    return Provider.OFFLINE


def default_model_for(provider: str) -> str:
    """LLM_MODEL is the default provider's model; another provider gets its own default."""
    if settings.LLM_MODEL and provider == default_provider_name():
        return settings.LLM_MODEL
    return settings.LLM_DEFAULT_MODELS.get(provider, "")


def default_models() -> dict[str, str]:
    """Each provider's default model (the default of the LLM_DEFAULT_MODELS setting)."""
    return {str(name): entry.default_model for name, entry in PROVIDERS.items()}


def price_ids() -> dict[str, str]:
    """Each provider's price id (the LLM_PRICE_IDS setting that costs.pricing reads)."""
    return {str(name): entry.price_id for name, entry in PROVIDERS.items()}


def complete(provider: str, request: LLMRequest, meter=None) -> LLMReply:
    """Run `request` on `provider` (one of PROVIDERS). With a `costs.metering.Meter`, the call
    goes through the ledger: its worst case is held against the budgets covering it first (a
    call that does not fit raises `BudgetRefused`, nothing spent), its real cost booked after."""
    from costs import metering  # costs loads models: not at settings time, which reads PROVIDERS

    if provider not in PROVIDERS:
        raise ProviderError(f"Unknown LLM provider: {provider}")
    if meter is None:
        return _complete(provider, request)
    try:
        ticket = metering.reserve(
            meter,
            provider,
            request.model,
            prompt_bound=prompt_bound(request),
            max_tokens=request.max_tokens,
            deadline=request.deadline,
        )
    except metering.BudgetExhausted as exc:
        raise BudgetRefused(exc.message) from exc
    try:
        reply = _complete(provider, request)
    except BaseException as exc:
        spent = getattr(exc, "reply", None)  # a failed tool loop keeps what it spent
        metering.settle(
            ticket,
            prompt_tokens=getattr(spent, "prompt_tokens", 0),
            completion_tokens=getattr(spent, "completion_tokens", 0),
            error=f"{type(exc).__name__}: {exc}",
        )
        raise
    metering.settle(
        ticket, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens
    )
    return reply


def _complete(provider: str, request: LLMRequest) -> LLMReply:
    from costs import metering

    with tracing.chat(provider, request) as span:
        reply = import_module(PROVIDERS[provider].module).complete(request)
        span.answered(reply)
    reply.provider = reply.provider or provider
    reply.model = reply.model or request.model
    # What a server claims is not trusted either: the sessions' and runs' token columns (and the
    # ledger's) take the counts as the ledger books them.
    reply.prompt_tokens = metering.bounded_tokens(
        reply.prompt_tokens, "prompt tokens", unknown=lambda: prompt_bound(request)
    )
    reply.completion_tokens = metering.bounded_tokens(
        reply.completion_tokens, "completion tokens", unknown=lambda: request.max_tokens
    )
    return reply.storable()


def prompt_bound(request: LLMRequest) -> int:
    """An upper bound of the request's prompt tokens (costs.pricing.worst_case_prompt_tokens)."""
    from costs.pricing import worst_case_prompt_tokens

    conversation = request.conversation()
    texts = [request.system]
    for message in conversation:
        texts.append(message.content)
        texts += [json.dumps(call.as_dict()) for call in message.tool_calls]
    texts += [json.dumps([spec.__dict__ for spec in request.tools])] if request.tools else []
    return worst_case_prompt_tokens(*texts, messages=len(conversation) + 1)


def warm_up() -> None:
    """Import the SDK providers and load the price table now (a worker at start-up): the first
    import takes seconds, and inside a session it would count against the first agents'
    timeouts."""
    from costs.pricing import load_price_table

    for provider in SDK_KEYS:
        import_module(PROVIDERS[provider].module)
    import_module("collaboration.providers.http").shared_client()
    load_price_table()
