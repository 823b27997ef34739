"""OpenAI-compatible chat completions (OpenAI, Azure, Ollama, vLLM, LM Studio) via the `openai` SDK.

The SDK honours OPENAI_API_KEY and OPENAI_BASE_URL; `strict_tools` sends `strict_schema`'s."""

import copy
import json

import openai
from openai.types.chat import ChatCompletion

from . import PROVIDERS
from .base import (
    LLMReply,
    LLMRequest,
    Provider,
    ProviderError,
    Role,
    StopReason,
    ToolCall,
)
from .http import sdk_call, sdk_options

STOP_REASONS = {
    "stop": StopReason.STOP,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
}
# Keywords strict mode refuses (OpenAI's "supported schemas"); the registry checks them itself.
NOT_IN_STRICT_MODE = {
    "minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties",
    "patternProperties", "unevaluatedProperties", "contains",
}  # fmt: skip
# The string formats strict mode knows; any other `format` is refused.
STRICT_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
}  # fmt: skip


def complete(request: LLMRequest) -> LLMReply:
    options, state = sdk_options(request, PROVIDERS[Provider.OPENAI].key)
    client = openai.OpenAI(**options)
    kwargs = {
        "model": request.model,
        "messages": wire_messages(request),
        "max_tokens": request.max_tokens,
    }
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if request.tools:
        kwargs["tools"] = wire_tools(request)
    completion = sdk_call(Provider.OPENAI, openai, state, lambda: _create(client, kwargs))
    if not completion.choices:
        raise ProviderError("openai: the response had no choices")
    choice = completion.choices[0]
    usage = completion.usage
    tool_calls = [_tool_call(c) for c in choice.message.tool_calls or []]
    reason = choice.finish_reason or ""
    return LLMReply(
        text=choice.message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        attempts=state.attempts,
        provider=Provider.OPENAI,
        model=completion.model or request.model,
        tool_calls=tool_calls,
        # Some compatible servers answer `stop` with tool calls: the calls are what counts.
        stop_reason=StopReason.TOOL_CALLS if tool_calls else STOP_REASONS.get(reason, reason),
    )


def _create(client: openai.OpenAI, body: dict) -> ChatCompletion:
    """`client.chat.completions.create(**body)` through the SDK's documented `client.post`, without
    `create`'s `maybe_transform`: our body is the wire format already, and walking a long
    conversation costs a worker CPU (bench/runtime.py)."""
    return client.post(
        "/chat/completions",
        cast_to=ChatCompletion,
        body=body,
        options={"security": {"bearer_auth": True}},
    )


def wire_messages(request: LLMRequest) -> list[dict]:
    """The system prompt, then the conversation, as chat-completion messages."""
    messages = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.conversation():
        if message.role == Role.TOOL:
            messages.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == Role.ASSISTANT:
            item = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _arguments_text(call)},
                    }
                    for call in message.tool_calls
                ]
            messages.append(item)
        else:
            messages.append({"role": "user", "content": message.content})
    return messages


def wire_tools(request: LLMRequest) -> list[dict]:
    tools = []
    for tool in request.tools:
        function = {
            "name": tool.name,
            "description": tool.description,
            "parameters": strict_schema(tool.input_schema)
            if request.strict_tools
            else tool.input_schema,
        }
        if request.strict_tools:
            function["strict"] = True
        tools.append({"type": "function", "function": function})
    return tools


def strict_schema(schema: dict) -> dict:
    """`schema` in the subset strict mode accepts: every property required, the optional ones
    nullable, every object closed, no keyword strict mode refuses."""
    schema = copy.deepcopy(schema)

    def visit(node):
        if isinstance(node, list):
            for item in node:
                visit(item)
            return
        if not isinstance(node, dict):
            return
        for keyword in NOT_IN_STRICT_MODE & set(node):
            del node[keyword]
        if "format" in node and node["format"] not in STRICT_FORMATS:
            del node["format"]  # int64, double, decimal: the registry checks them itself
        kind = node.get("type")
        if (kind == "object" or isinstance(kind, list) and "object" in kind) and not isinstance(
            node.get("properties"), dict
        ):
            # A free-form object cannot be strict: closed, it can only be {} (the registry's
            # free-form objects are offered as JSON text beside it).
            node["properties"] = {}
        properties = node.get("properties")
        if isinstance(properties, dict):
            required = set(node.get("required", []))
            for name, sub in properties.items():
                visit(sub)
                if name not in required:
                    properties[name] = _nullable(sub)
            node["required"] = list(properties)
            node["additionalProperties"] = False
        for key in ("items", "anyOf", "oneOf", "allOf", "$defs", "definitions"):
            if key in ("$defs", "definitions") and isinstance(node.get(key), dict):
                visit(list(node[key].values()))
            elif key in node:
                visit(node[key])

    visit(schema)
    return schema


def _nullable(schema: dict) -> dict:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return schema
    if isinstance(kind, str) and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(schema.get("anyOf"), list):  # one more choice, not an anyOf in an anyOf
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _arguments_text(call: ToolCall) -> str:
    if call.invalid_arguments is not None:
        return call.invalid_arguments
    return json.dumps(call.arguments)


def _tool_call(raw) -> ToolCall:
    """The SDK's tool call as ours; arguments that are not a JSON object are kept as text."""
    function = getattr(raw, "function", None)
    if function is None:  # a custom (free-text) tool call: we never offer one
        custom = getattr(raw, "custom", None)
        return ToolCall(
            id=raw.id,
            name=getattr(custom, "name", "") or "",
            invalid_arguments=str(getattr(custom, "input", "")),
        )
    text = function.arguments or ""
    try:
        arguments = json.loads(text) if text.strip() else {}
    except (json.JSONDecodeError, RecursionError):  # nested past the parser's own limit
        arguments = None
    if not isinstance(arguments, dict):
        return ToolCall(id=raw.id, name=function.name, invalid_arguments=text)
    return ToolCall(id=raw.id, name=function.name, arguments=arguments)
