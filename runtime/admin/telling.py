"""A run told as a person reads it: its conversation, its outcome, what woke its agent."""

import json

from django.urls import reverse
from django.utils.html import format_html

from organization.admin.display import human

from ..models import Run

# How much of a tool result or a model text the run's page shows (the API has it all), and past
# how many lines a result is folded under its first line.
SHOWN_CHARS = 6_000
FOLDED_LINES = 12

# What woke the agent, as a sentence about the task (the inbox kinds of runtime.models.TRIGGERS).
WOKEN_BECAUSE = {
    "created": "a task was created for it",
    "assigned": "a task was assigned to it",
    "auto_assigned": "a task queued for it reached it when it had room",
    "delegated": "a task was delegated to it",
    "escalated": "a task was escalated to it",
    "comment": "someone commented on a task it works on",
    "subtasks_done": "the last open subtask of its task finished",
    "resumed": "it was resumed with work waiting for it",
}


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _pretty(value) -> str:
    """A value as a person reads it: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _arguments(arguments) -> list[tuple[str, str]]:
    """A call's arguments as (name, value) lines."""
    if not isinstance(arguments, dict):
        return [("arguments", _pretty(arguments))] if arguments not in (None, "") else []
    return [(str(name), _cut(_pretty(value))) for name, value in arguments.items()]


def _tool_entry(turn: dict) -> dict:
    """A tool call: its name, its arguments as lines, and its answer or its refusal in words."""
    entry = {
        "kind": "tool",
        "name": turn.get("name"),
        "arguments": _arguments(turn.get("arguments")),
    }
    status = turn.get("status")
    if status == "error":
        error = turn.get("error")
        said = error.get("error", "") if isinstance(error, dict) else _pretty(error)
        code = error.get("code", "") if isinstance(error, dict) else ""
        return {**entry, "ok": False, "said": f"Refused: {said}", "code": code}
    if status != "ok":
        return {**entry, "ok": None, "said": "Running: its outcome is not recorded yet."}
    answer = turn.get("result")
    result = _cut(_pretty(answer))
    lines = result.count("\n") + 1
    return {
        **entry,
        "ok": True,
        "result": result,
        "lines": lines,
        "folded": lines > FOLDED_LINES,
        "gist": _gist(answer, result),
    }


def _gist(answer, shown: str) -> str:
    """What a folded answer holds, in a line: its fields, its count of items, or its start."""
    if isinstance(answer, dict):
        return "with " + ", ".join(str(key) for key in answer)
    if isinstance(answer, list):
        return f"{len(answer)} item{'' if len(answer) == 1 else 's'}"
    return shown.split("\n", 1)[0]


def conversation(run: Run) -> list[dict]:
    """The run's turns as the page tells them: the model's words, then each call it made with
    its arguments and what it answered (plain data; the template escapes every value)."""
    entries = []
    for turn in run.turns or []:
        if turn.get("kind") == "model":
            entries.append(
                {
                    "kind": "model",
                    "text": _cut(turn.get("text") or ""),
                    "tokens": (turn.get("prompt_tokens") or 0, turn.get("completion_tokens") or 0),
                    "ms": turn.get("provider_ms"),
                    "calls": [c.get("name") for c in turn.get("tool_calls") or []],
                }
            )
        else:
            entries.append(_tool_entry(turn))
    return entries


def outcome_sentence(item: dict, titles: dict[int, str]) -> str:
    """One line of a run's outcome: what the runtime did with a task once the model stopped."""
    task = f"Task #{item.get('task')}"
    if item.get("task") in titles:
        task += f" “{titles[item['task']]}”"
    action, why = item.get("action"), item.get("why", "")
    if action == "completed":
        return f"{task}: completed with the model's final answer."
    if action == "blocked":
        return f"{task}: blocked" + (f" — {why}." if why else ".")
    if action == "none":
        return f"{task}: left as it was" + (f" ({why})." if why else ".")
    return f"{task}: {human(action).lower()}" + (f" ({why})." if why else ".")


def run_link(run: Run):
    url = reverse("admin:runtime_run_change", args=[run.pk])
    return format_html('<a href="{}">run #{}</a>', url, run.pk)
