"""What a run's tool calls did, read from its turns: the tasks it acted on, finished or took on."""

from __future__ import annotations

import re

from collaboration.providers.turns import (
    ToolCallTurn,
    Turn,
    answer_of,
    succeeded_calls,
    tool_call_turns,
)
from organization import registry
from tasks.models import FINISHED_STATUSES, TaskStatus

from .models import SETTLEABLE


def _only_starts(turn: ToolCallTurn) -> bool:
    """The call moved its task to in_progress, and nothing more: starting a task is not doing
    something with it (its final answer is still its result)."""
    status = turn["arguments"].get("status")
    return turn["name"] == "update_task_status" and status == TaskStatus.IN_PROGRESS


def _writes(turn: ToolCallTurn) -> bool:
    tool = registry.REGISTRY.get(turn["name"])
    return tool is not None and not tool.read_only


def acted_on(turns: list[Turn]) -> set[int]:
    """The tasks a successful writing call named (as task_id, parent or task), but for a call
    that only started its task."""
    named = set()
    for turn in succeeded_calls(turns):
        if not _writes(turn) or _only_starts(turn):
            continue
        # `task`: the task an agent asked a human about (ask_human); it waits for the answer.
        for key in ("task_id", "parent", "task"):
            task_id = _as_task_id(turn["arguments"].get(key))
            if task_id is not None:
                named.add(task_id)
    return named


_WHOLE_DECIMAL = re.compile(r"\.0*\s*$")  # DRF's IntegerField.re_decimal


def _as_task_id(value) -> int | None:
    """An id as the tools' serializers (DRF's IntegerField) read it: 12, "12", 12.0, "12.0"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        value = _WHOLE_DECIMAL.sub("", value).strip()
        return int(value) if value.isdigit() else None
    return value if isinstance(value, int) else None


def finished_a_subtask(turns: list[Turn]) -> bool:
    """A successful call left a subtask finished (its answer, the task, says so): only then can
    the run have finished the last open subtask of a parent."""
    return any(
        (answer := answer_of(turn)) is not None
        and answer.get("parent") is not None
        and answer.get("status") in FINISHED_STATUSES
        for turn in succeeded_calls(turns)
    )


def answered_task_ids(turns: list[Turn]) -> set[int]:
    """The ids of the tasks the calls answered with, whatever their outcome."""
    return {
        answer["id"]
        for turn in tool_call_turns(turns)
        if (answer := answer_of(turn)) is not None and isinstance(answer.get("id"), int)
    }


def tasks_it_took_on(turns: list[Turn], handle: str) -> set[int]:
    """The tasks a successful writing call left with the agent `handle`, assigned or in
    progress: one it created for itself, one it claimed."""
    return {
        answer["id"]
        for turn in succeeded_calls(turns)
        if (answer := answer_of(turn)) is not None
        and answer.get("assignee") == handle
        and answer.get("status") in SETTLEABLE
        and isinstance(answer.get("id"), int)
        and _writes(turn)
    }
