"""Anthropic messages via the official `anthropic` SDK (it honours ANTHROPIC_API_KEY/_BASE_URL)."""

import anthropic

from .base import SDK_KEYS, LLMReply, LLMRequest, Provider
from .http import sdk_call, sdk_options


def complete(request: LLMRequest) -> LLMReply:
    options, state = sdk_options(request, SDK_KEYS[Provider.ANTHROPIC])
    client = anthropic.Anthropic(**options)
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
    message = sdk_call(
        Provider.ANTHROPIC, anthropic, state, lambda: client.messages.create(**kwargs)
    )
    text = "".join(getattr(block, "text", "") or "" for block in message.content or [])
    usage = message.usage
    return LLMReply(
        text=text,
        prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
        completion_tokens=getattr(usage, "output_tokens", 0) or 0,
        attempts=state.attempts,
        provider=Provider.ANTHROPIC,
        model=message.model or request.model,
    )
