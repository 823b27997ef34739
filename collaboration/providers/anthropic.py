"""Anthropic messages via the official `anthropic` SDK (it honours ANTHROPIC_API_KEY/_BASE_URL)."""

import os

import anthropic
from django.conf import settings

from . import LLMReply, LLMRequest, ProviderError, ProviderTimeout
from .http import client_for, headers_for, timeout_for


def complete(request: LLMRequest) -> LLMReply:
    http_client, transport = client_for(request.deadline)
    client = anthropic.Anthropic(
        api_key=os.environ.get("ANTHROPIC_API_KEY") or "no-key-configured",
        timeout=timeout_for(request.deadline, settings.COLLAB_AGENT_TIMEOUT),
        max_retries=settings.COLLAB_PROVIDER_MAX_RETRIES,
        http_client=http_client,
        default_headers=headers_for(request),
    )
    kwargs = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [{"role": "user", "content": request.prompt}],
    }
    if request.system:
        kwargs["system"] = request.system
    if request.temperature is not None:
        # anthropic 2.x's create() has no temperature parameter; the API still takes it.
        kwargs["extra_body"] = {"temperature": request.temperature}
    try:
        message = client.messages.create(**kwargs)
    except anthropic.APITimeoutError as exc:
        raise ProviderTimeout(
            f"anthropic: timed out after {transport.attempts} attempt(s)"
        ) from exc
    except anthropic.APIStatusError as exc:
        if transport.expired:
            raise ProviderTimeout(
                f"anthropic: the agent's time ran out after {transport.attempts} attempt(s)"
            ) from exc
        raise ProviderError(
            f"anthropic: HTTP {exc.status_code} after {transport.attempts} attempt(s): {exc.message}"
        ) from exc
    except anthropic.APIError as exc:
        raise ProviderError(f"anthropic: {exc.message}") from exc
    text = "".join(getattr(block, "text", "") or "" for block in message.content or [])
    usage = message.usage
    return LLMReply(
        text=text,
        prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
        completion_tokens=getattr(usage, "output_tokens", 0) or 0,
        attempts=transport.attempts,
        provider="anthropic",
        model=message.model or request.model,
    )
