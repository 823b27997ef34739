"""The types every provider shares: the provider names, a request, a reply and the errors.

Tool calling is provider-neutral here; each provider module translates it to its wire format."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class Provider(StrEnum):
    """The LLM providers' names (each has its entry in the registry, `PROVIDERS`)."""

    OFFLINE = "offline"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


class Purpose(StrEnum):
    """What a call is for (the offline provider answers by it; sent as a header too)."""

    AGENT = "agent"
    PLAN = "plan"
    SYNTHESIS = "synthesis"
    JUDGE = "judge"
    # A managed agent's run: the offline provider answers it with the routine its request carries.
    RUN = "run"


class Role(StrEnum):
    """Who speaks in a conversation (the system prompt is the request's own field)."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class StopReason(StrEnum):
    """Why the model stopped, the same for every provider (`LLMReply.stop_reason`)."""

    STOP = "stop"  # it answered (OpenAI `stop`, Anthropic `end_turn` / `stop_sequence`)
    TOOL_CALLS = "tool_calls"  # it asks for tool calls (OpenAI `tool_calls`, Anthropic `tool_use`)
    MAX_TOKENS = "max_tokens"  # cut at max_tokens (OpenAI `length`, Anthropic `max_tokens`)


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, and its params' JSON Schema."""

    name: str
    description: str
    input_schema: dict


@dataclass
class ToolCall:
    """A tool call the model asked for. `id` is the provider's (its result must name it)."""

    id: str
    name: str
    arguments: dict = field(default_factory=dict)
    # The arguments as the model wrote them when they were not a JSON object (then `arguments`
    # is empty, and the call is answered with an error rather than run).
    invalid_arguments: str | None = None

    def as_dict(self) -> dict:
        data = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid_arguments is not None:
            data["invalid_arguments"] = self.invalid_arguments
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "ToolCall":
        return cls(
            id=data["id"],
            name=data["name"],
            arguments=dict(data.get("arguments") or {}),
            invalid_arguments=data.get("invalid_arguments"),
        )


@dataclass
class Message:
    """One message of a conversation: a user's text, the assistant's text and tool calls, or the
    result of one tool call (`tool_call_id`, its text, and whether it is an error)."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    is_error: bool = False

    @classmethod
    def user(cls, text: str) -> "Message":
        return cls(Role.USER, text)

    @classmethod
    def assistant(cls, text: str, tool_calls: list[ToolCall] | None = None) -> "Message":
        return cls(Role.ASSISTANT, text, list(tool_calls or []))

    @classmethod
    def tool_result(cls, tool_call_id: str, text: str, *, is_error: bool = False) -> "Message":
        return cls(Role.TOOL, text, tool_call_id=tool_call_id, is_error=is_error)


@dataclass
class LLMRequest:
    system: str
    prompt: str
    model: str
    temperature: float | None = None
    max_tokens: int = 1024
    # time.monotonic() by which the call must be over, retries included.
    deadline: float | None = None
    # What the call is for (a Purpose): the offline provider uses it, and it is sent as a header
    # so a test server can tell the calls apart.
    purpose: str = Purpose.AGENT
    # The agent's name in the session (sent as a header too).
    label: str = ""
    # Structured facts for the offline provider only (e.g. the specialists of a plan).
    hints: dict = field(default_factory=dict)
    # A conversation instead of the one `prompt` (the tool loop's): when given, it is the whole
    # conversation after the system prompt, and `prompt` is not sent.
    messages: list[Message] = field(default_factory=list)
    # Tools the model may call. Empty: a plain completion, exactly as without tool calling.
    tools: list[ToolSpec] = field(default_factory=list)
    # OpenAI's strict mode for the tools' schemas (openai.py says what changes); others ignore it.
    strict_tools: bool = False
    # The offline provider's answer to this request, when a scripted routine plays the model
    # (the runtime's, for a run): request -> (text, tool calls). Other providers ignore it.
    offline_routine: "Routine | None" = field(default=None, repr=False, compare=False)

    def conversation(self) -> list[Message]:
        """The messages after the system prompt: `messages`, else the one user `prompt`."""
        return list(self.messages) if self.messages else [Message.user(self.prompt)]


# A scripted routine of the offline provider: this turn's text and tool calls for the request.
Routine = Callable[[LLMRequest], tuple[str, list[ToolCall]]]


@dataclass
class LLMReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    provider: str = ""
    model: str = ""
    # The tool calls the model asks for (empty: it answered), and why it stopped (a StopReason,
    # or the provider's own word for a reason that has none here).
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str = StopReason.STOP

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def storable(self) -> "LLMReply":
        """This reply as the service can keep and answer it: NUL and lone surrogates become U+FFFD
        (PostgreSQL refuses them), and arguments nested deeper than MAX_ARGUMENT_DEPTH are refused
        as invalid (the JSON renderers stop at 255 levels), so the tool loop never runs them."""
        self.text = _storable_strings(self.text)
        self.tool_calls = _unique_ids([_storable_call(call) for call in self.tool_calls])
        # What the server says answered is kept in a column of 100 characters.
        self.model = _storable_strings(self.model)[:100]
        self.stop_reason = _storable_strings(self.stop_reason)[:100]
        return self


# Deeper than any tool's schema; far below the renderers' limits (orjson 255, json ~1,000).
MAX_ARGUMENT_DEPTH = 64


def _unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Each call of a reply with an id of its own (results are matched by id; some servers repeat
    one or send none): a repeated or missing id gets a suffix, as stored and sent back."""
    seen: set[str] = set()
    for n, call in enumerate(calls, start=1):
        if not call.id or call.id in seen:
            base = call.id or "call"
            call.id = next(
                f"{base}-{k}" for k in range(n, n + len(calls) + 1) if f"{base}-{k}" not in seen
            )
        seen.add(call.id)
    return calls


def _storable_call(call: ToolCall) -> ToolCall:
    if call.invalid_arguments is None and _deeper_than(call.arguments, MAX_ARGUMENT_DEPTH):
        return ToolCall(
            id=_storable_strings(call.id),
            name=_storable_strings(call.name),
            invalid_arguments=f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels)",
        )
    return ToolCall(
        id=_storable_strings(call.id),
        name=_storable_strings(call.name),
        arguments=_storable_strings(call.arguments),
        invalid_arguments=_storable_strings(call.invalid_arguments),
    )


# What PostgreSQL cannot store in text or jsonb: NUL, and a lone surrogate (a model's output cut
# in the middle of an emoji), which failed the run with a DataError and lost the answer.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable_strings(value):
    """`value` with every NUL and lone surrogate in its strings (keys too) as U+FFFD; bounded
    depth (checked first)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_storable_strings(k): _storable_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable_strings(v) for v in value]
    return value


def _deeper_than(value, limit: int) -> bool:
    """Whether `value` nests lists and dicts more than `limit` deep (no recursion: any depth)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


class ProviderError(Exception):
    """The call failed for good (after the SDK's own retries); the message is safe to show."""


class ProviderTimeout(ProviderError):
    """The agent's time ran out."""


class BudgetRefused(ProviderError):
    """A budget covering the call has no room for its worst case: it was not made (409
    `budget_exhausted` where a door answers it)."""

    code = "budget_exhausted"
