"""LLM providers: `openai` and `anthropic` through their official SDKs, and a deterministic `offline`.

A provider turns an `LLMRequest` into an `LLMReply` (text + token usage + HTTP attempts, and the
tool calls the model asks for when the request offers tools) or raises `ProviderError` /
`ProviderTimeout` (the shared types are in `base.py`, the tool-calling ones included: `ToolSpec`,
`ToolCall`, `Message`). API keys are read by the
SDKs from the environment only (OPENAI_API_KEY, ANTHROPIC_API_KEY): they are never stored in the
database, the admin or a reply.

`PROVIDERS` is the registry: name → the module whose `complete(request)` runs a call, imported on
first use (an SDK import takes seconds). Adding a provider is a module and a line here.
"""

import json
import os
from importlib import import_module

from django.conf import settings

from costs import metering
from costs.pricing import load_price_table, worst_case_prompt_tokens

from .base import (
    SDK_KEYS,
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
    "PROVIDERS",
    "BudgetRefused",
    "LLMReply",
    "LLMRequest",
    "Message",
    "Provider",
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

PROVIDERS = {
    Provider.OFFLINE: "collaboration.providers.offline",
    Provider.OPENAI: "collaboration.providers.openai",
    Provider.ANTHROPIC: "collaboration.providers.anthropic",
}


def default_provider_name() -> str:
    """`LLM_PROVIDER`, else openai if OPENAI_API_KEY is set, else anthropic if its key is, else offline."""
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


def complete(provider: str, request: LLMRequest, meter=None) -> LLMReply:
    """Run `request` on `provider` (one of PROVIDERS). With a `costs.metering.Meter`, the call
    goes through the ledger: its worst case is held against the budgets covering it first (a
    call that does not fit raises `BudgetRefused`, nothing spent), its real cost booked after."""
    if provider not in PROVIDERS:
        raise ProviderError(f"Unknown LLM provider: {provider}")
    if meter is None:
        return _complete(provider, request)
    try:
        ticket = metering.reserve(
            meter, provider, request.model, prompt_bound=prompt_bound(request),
            max_tokens=request.max_tokens, deadline=request.deadline,
        )  # fmt: skip
    except metering.BudgetExhausted as exc:
        raise BudgetRefused(exc.message) from exc
    try:
        reply = _complete(provider, request)
    except BaseException as exc:
        spent = getattr(exc, "reply", None)  # a failed tool loop keeps what it spent
        metering.settle(
            ticket, prompt_tokens=getattr(spent, "prompt_tokens", 0),
            completion_tokens=getattr(spent, "completion_tokens", 0),
            error=f"{type(exc).__name__}: {exc}",
        )  # fmt: skip
        raise
    metering.settle(
        ticket, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens
    )
    return reply


def _complete(provider: str, request: LLMRequest) -> LLMReply:
    reply = import_module(PROVIDERS[provider]).complete(request)
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
    for provider in SDK_KEYS:
        import_module(PROVIDERS[provider])
    import_module("collaboration.providers.http").shared_client()
    load_price_table()
