"""OpenAI-compatible chat completions (OpenAI, Azure, Ollama, vLLM, LM Studio) via the `openai` SDK.

The SDK itself honours OPENAI_API_KEY and OPENAI_BASE_URL.
"""

import os

import openai
from django.conf import settings

from . import LLMReply, LLMRequest, ProviderError, ProviderTimeout
from .http import client_for, headers_for, timeout_for


def complete(request: LLMRequest) -> LLMReply:
    http_client, transport = client_for(request.deadline)
    client = openai.OpenAI(
        # Local OpenAI-compatible servers (Ollama, vLLM) need no key; the SDK insists on one.
        api_key=os.environ.get("OPENAI_API_KEY") or "no-key-configured",
        timeout=timeout_for(request.deadline, settings.COLLAB_AGENT_TIMEOUT),
        max_retries=settings.COLLAB_PROVIDER_MAX_RETRIES,
        http_client=http_client,
        default_headers=headers_for(request),
    )
    messages = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": request.prompt})
    kwargs = {"model": request.model, "messages": messages, "max_tokens": request.max_tokens}
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    try:
        completion = client.chat.completions.create(**kwargs)
    except openai.APITimeoutError as exc:
        raise ProviderTimeout(f"openai: timed out after {transport.attempts} attempt(s)") from exc
    except openai.APIStatusError as exc:
        if transport.expired:
            raise ProviderTimeout(
                f"openai: the agent's time ran out after {transport.attempts} attempt(s)"
            ) from exc
        raise ProviderError(
            f"openai: HTTP {exc.status_code} after {transport.attempts} attempt(s): {exc.message}"
        ) from exc
    except openai.APIError as exc:
        raise ProviderError(f"openai: {exc.message}") from exc
    if not completion.choices:
        raise ProviderError("openai: the response had no choices")
    usage = completion.usage
    return LLMReply(
        text=completion.choices[0].message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        attempts=transport.attempts,
        provider="openai",
        model=completion.model or request.model,
    )
