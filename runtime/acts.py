"""What a run's tool calls did, read from its turns: the tasks it acted on, finished or took on."""

from __future__ import annotations

import re

from collaboration.toolloop import CallStatus, TurnKind
from organization import registry
from tasks.models import FINISHED_STATUSES, TaskStatus


def _only_starts(turn: dict) -> bool:
    """The call moved its task to in_progress, and nothing more: starting a task (as the run's
    guide says to) is not doing something with it; its final answer is still its result."""
    status = turn["arguments"].get("status")
    return turn["name"] == "update_task_status" and status == TaskStatus.IN_PROGRESS


def acted_on(turns: list[dict]) -> set[int]:
    """The tasks a successful writing tool call of the run named (as task_id or parent), but
    for a call that only started its task."""
    named = set()
    for turn in turns:
        if turn["kind"] != TurnKind.TOOL_CALL or turn.get("status") != CallStatus.OK:
            continue
        tool = registry.REGISTRY.get(turn["name"])
        if tool is None or tool.read_only or _only_starts(turn):
            continue
        for key in ("task_id", "parent"):
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


def finished_a_subtask(turns: list[dict]) -> bool:
    """Whether a successful writing call of the run left a subtask finished (its answer, the
    task, says so): only then can the run have finished the last open subtask of a parent."""
    return any(
        turn["kind"] == TurnKind.TOOL_CALL and turn.get("status") == CallStatus.OK
        and isinstance(answer := turn.get("result"), dict) and answer.get("parent") is not None
        and answer.get("status") in FINISHED_STATUSES
        for turn in turns
    )  # fmt: skip
