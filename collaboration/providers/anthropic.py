"""Anthropic messages via the official `anthropic` SDK (it honours ANTHROPIC_API_KEY/_BASE_URL).

Tools as `tools`, calls as `tool_use` blocks, results as `tool_result` blocks, sides alternating."""

import json

import anthropic

from . import PROVIDERS
from .base import LLMReply, LLMRequest, Message, Provider, Role, StopReason, ToolCall
from .http import sdk_call, sdk_options

STOP_REASONS = {
    "end_turn": StopReason.STOP,
    "stop_sequence": StopReason.STOP,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
}


def complete(request: LLMRequest) -> LLMReply:
    options, state = sdk_options(request, PROVIDERS[Provider.ANTHROPIC].key)
    client = anthropic.Anthropic(**options)
    kwargs = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": wire_messages(request.conversation()),
    }
    if request.system:
        kwargs["system"] = request.system
    if request.tools:
        kwargs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if request.temperature is not None:
        # anthropic 2.x's create() has no temperature parameter; the API still takes it.
        kwargs["extra_body"] = {"temperature": request.temperature}
    message = sdk_call(
        Provider.ANTHROPIC, anthropic, state, lambda: client.messages.create(**kwargs)
    )
    blocks = message.content or []
    text = "".join(getattr(block, "text", "") or "" for block in blocks if block.type == "text")
    tool_calls = [_tool_call(block) for block in blocks if block.type == "tool_use"]
    reason = message.stop_reason or ""
    usage = message.usage
    return LLMReply(
        text=text,
        prompt_tokens=getattr(usage, "input_tokens", 0) or 0,
        completion_tokens=getattr(usage, "output_tokens", 0) or 0,
        attempts=state.attempts,
        provider=Provider.ANTHROPIC,
        model=message.model or request.model,
        tool_calls=tool_calls,
        stop_reason=StopReason.TOOL_CALLS if tool_calls else STOP_REASONS.get(reason, reason),
    )


def wire_messages(conversation: list[Message]) -> list[dict]:
    """The conversation as alternating user/assistant messages: a plain user text stays a string,
    tool calls and results are content blocks, a side's consecutive messages are merged."""
    wire: list[dict] = []
    for message in conversation:
        role, blocks = _blocks(message)
        if wire and wire[-1]["role"] == role:
            previous = wire[-1]
            if isinstance(previous["content"], str):
                previous["content"] = [{"type": "text", "text": previous["content"]}]
            previous["content"].extend(blocks)
        elif role == Role.USER and blocks[0]["type"] == "text" and len(blocks) == 1:
            wire.append({"role": role, "content": blocks[0]["text"]})
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def _blocks(message: Message) -> tuple[str, list[dict]]:
    if message.role == Role.TOOL:
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return Role.USER, [block]
    if message.role == Role.ASSISTANT:
        # The API refuses a text block that is empty or only whitespace ("\n\n" beside a
        # tool_use is a reply Claude may give), and an empty assistant message.
        text = message.content if message.content and message.content.strip() else ""
        blocks = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
        return Role.ASSISTANT, blocks or [{"type": "text", "text": "(no answer)"}]
    return Role.USER, [{"type": "text", "text": message.content}]


def _tool_call(block) -> ToolCall:
    arguments = block.input
    if isinstance(arguments, dict):
        return ToolCall(id=block.id, name=block.name, arguments=arguments)
    return ToolCall(id=block.id, name=block.name, invalid_arguments=json.dumps(arguments))
