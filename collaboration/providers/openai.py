"""OpenAI-compatible chat completions (OpenAI, Azure, Ollama, vLLM, LM Studio) via the `openai` SDK.

The SDK itself honours OPENAI_API_KEY and OPENAI_BASE_URL.
"""

import openai

from .base import SDK_KEYS, LLMReply, LLMRequest, Provider, ProviderError
from .http import sdk_call, sdk_options


def complete(request: LLMRequest) -> LLMReply:
    options, state = sdk_options(request, SDK_KEYS[Provider.OPENAI])
    client = openai.OpenAI(**options)
    messages = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": request.prompt})
    kwargs = {"model": request.model, "messages": messages, "max_tokens": request.max_tokens}
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    completion = sdk_call(
        Provider.OPENAI, openai, state, lambda: client.chat.completions.create(**kwargs)
    )
    if not completion.choices:
        raise ProviderError("openai: the response had no choices")
    usage = completion.usage
    return LLMReply(
        text=completion.choices[0].message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        attempts=state.attempts,
        provider=Provider.OPENAI,
        model=completion.model or request.model,
    )
