"""The tool loop's turns, typed: a model turn (a reply as recorded) and a tool call's turn.

Turns stay JSON-able dicts (a run stores each as a row), hence TypedDicts and readers."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NotRequired, TypedDict

from .base import LLMReply


class TurnKind(StrEnum):
    MODEL = "model"
    TOOL_CALL = "tool_call"


class CallData(TypedDict):
    """A tool call the model asked for, as a model turn records it (`ToolCall.as_dict`)."""

    id: str
    name: str
    arguments: dict
    invalid_arguments: NotRequired[str]


class ModelTurn(TypedDict):
    """One model call: what the provider returned (text, tool calls, usage, why it stopped)."""

    kind: str
    index: int
    text: str
    tool_calls: list[CallData]
    stop_reason: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    provider: str
    model: str
    # How long the provider call took, in ms (a managed run's record adds it).
    provider_ms: NotRequired[float]


class CallStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"


class ToolCallTurn(TypedDict):
    """One tool call: `running`, then `ok` with its `result` or `error` with the error body."""

    kind: str
    index: int
    id: str
    name: str
    arguments: dict
    status: str
    result: NotRequired[Any]
    error: NotRequired[dict]
    # With an atomic record: when the call started and how long it ran (ms).
    started_at: NotRequired[str]
    ms: NotRequired[float]


Turn = ModelTurn | ToolCallTurn


def model_turn(reply: LLMReply) -> ModelTurn:
    """The reply as a model turn (its `index` is given when it joins the turns)."""
    return {
        "kind": TurnKind.MODEL,
        "text": reply.text,
        "tool_calls": [call.as_dict() for call in reply.tool_calls],
        "stop_reason": str(reply.stop_reason),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "attempts": reply.attempts,
        "provider": reply.provider,
        "model": reply.model,
    }  # type: ignore[typeddict-item]


def model_turns(turns: list[Turn]) -> list[ModelTurn]:
    """The model turns, in order."""
    return [turn for turn in turns if turn["kind"] == TurnKind.MODEL]  # type: ignore[misc]


def tool_call_turns(turns: list[Turn]) -> list[ToolCallTurn]:
    """The tool calls' turns, in order."""
    return [turn for turn in turns if turn["kind"] == TurnKind.TOOL_CALL]  # type: ignore[misc]


def succeeded_calls(turns: list[Turn]) -> list[ToolCallTurn]:
    """The tool calls that answered `ok`, in order."""
    return [turn for turn in tool_call_turns(turns) if turn.get("status") == CallStatus.OK]


def answer_of(turn: ToolCallTurn) -> dict | None:
    """The call's result when it is an object (a task, for the task tools), else None."""
    answer = turn.get("result")
    return answer if isinstance(answer, dict) else None


def tokens_of(turns: list[Turn]) -> tuple[int, int]:
    """The prompt and completion tokens of the model turns."""
    models = model_turns(turns)
    return (
        sum(t["prompt_tokens"] for t in models),
        sum(t["completion_tokens"] for t in models),
    )
