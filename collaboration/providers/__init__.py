"""LLM providers: `openai` and `anthropic` through their official SDKs, and a deterministic `offline`.

A provider turns an `LLMRequest` into an `LLMReply` (text + token usage + HTTP attempts) or raises
`ProviderError` / `ProviderTimeout`. API keys are read by the SDKs from the environment only
(OPENAI_API_KEY, ANTHROPIC_API_KEY): they are never stored in the database, the admin or a reply.
"""

import os
from dataclasses import dataclass, field

from django.conf import settings

PROVIDERS = ("offline", "openai", "anthropic")


@dataclass
class LLMRequest:
    system: str
    prompt: str
    model: str
    temperature: float | None = None
    max_tokens: int = 1024
    # time.monotonic() by which the call must be over, retries included.
    deadline: float | None = None
    # What the call is for: "agent", "plan", "synthesis" or "judge" (the offline provider uses it,
    # and it is sent as a header so a test server can tell the calls apart).
    purpose: str = "agent"
    # The agent's name in the session (sent as a header too).
    label: str = ""
    # Structured facts for the offline provider only (e.g. the specialists of a plan).
    hints: dict = field(default_factory=dict)


@dataclass
class LLMReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    provider: str = ""
    model: str = ""

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ProviderError(Exception):
    """The call failed for good (after the SDK's own retries); the message is safe to show."""


class ProviderTimeout(ProviderError):
    """The agent's time ran out."""


def default_provider_name() -> str:
    """`LLM_PROVIDER`, else openai if OPENAI_API_KEY is set, else anthropic if its key is, else offline."""
    if settings.LLM_PROVIDER:
        return settings.LLM_PROVIDER
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "offline"


def default_model_for(provider: str) -> str:
    """LLM_MODEL is the default provider's model; another provider gets its own default."""
    if settings.LLM_MODEL and provider == default_provider_name():
        return settings.LLM_MODEL
    return settings.LLM_DEFAULT_MODELS.get(provider, "")


def complete(provider: str, request: LLMRequest) -> LLMReply:
    """Run `request` on `provider` (one of PROVIDERS)."""
    if provider == "openai":
        from .openai import complete as run
    elif provider == "anthropic":
        from .anthropic import complete as run
    elif provider == "offline":
        from .offline import complete as run
    else:
        raise ProviderError(f"Unknown LLM provider: {provider}")
    reply = run(request)
    reply.provider = reply.provider or provider
    reply.model = reply.model or request.model
    return reply


def warm_up() -> None:
    """Import both SDKs now (a worker at start-up): the first import takes seconds, and inside a
    session it would count against the first agents' timeouts."""
    from . import anthropic, openai  # noqa: F401
    from .http import shared_client

    shared_client()
