"""The offline provider works the organization too: deterministically, saying so.

`decide` plays each task the agent holds: finish, wait, split, do or route it."""

from __future__ import annotations

import json
import re

from collaboration.providers import LLMRequest, Message, Role, ToolCall
from collaboration.providers.offline import BANNER

from .context import context_of

HELD = ("assigned", "in_progress", "blocked")
DONE = ("completed", "failed", "cancelled")
PART = re.compile(r"^\s*[-*]\s+(?P<title>.+?)\s*\((?P<expertise>[^()]+)\)\s*$")
MAX_NOTE = 1_900


def parts_of(description: str) -> list[tuple[str, str]]:
    """The parts a description lists, one per line as `- <title> (<expertise>)`."""
    found = [PART.match(line) for line in (description or "").splitlines()]
    return [(m["title"], m["expertise"].strip()) for m in found if m]


class Conversation:
    """The calls made so far in the run and their outcomes, by call id."""

    def __init__(self, messages: list[Message]):
        self.calls: dict[str, ToolCall] = {}
        self.results: dict[str, tuple[bool, object]] = {}
        for message in messages:
            if message.role == Role.ASSISTANT:
                for call in message.tool_calls:
                    self.calls[call.id] = call
            elif message.role == Role.TOOL:
                self.results[message.tool_call_id] = _outcome(message)
        self.turns = sum(m.role == Role.ASSISTANT for m in messages)

    def made(self, call_id: str) -> bool:
        return call_id in self.calls

    def ok(self, call_id: str) -> bool:
        return self.results.get(call_id, (False, None))[0]

    def answered(self, call_id: str) -> bool:
        return call_id in self.results

    def value(self, call_id: str):
        return self.results.get(call_id, (False, None))[1]


def _outcome(message: Message) -> tuple[bool, object]:
    try:
        value = json.loads(message.content)
    except (json.JSONDecodeError, TypeError):
        value = message.content
    failed = message.is_error or (
        isinstance(value, dict) and value.get("success") is False and "code" in value
    )
    return (not failed, value)


def _call(for_task: int, step: str, name: str, **arguments) -> ToolCall:
    """A tool call for task `for_task`'s `step`; its id says both."""
    return ToolCall(id=f"rt-{for_task}-{step}", name=name, arguments=arguments)


def _start(task: dict) -> list[ToolCall]:
    if task["status"] == "in_progress":
        return []
    return [
        _call(task["id"], "start", "update_task_status", task_id=task["id"], status="in_progress")
    ]


def _plan(task: dict, agent: dict) -> str:
    progress = task.get("subtask_progress") or {"done": 0, "total": 0}
    if progress["total"]:
        return "finish" if progress["done"] == progress["total"] else "wait"
    if agent.get("reports") and len(parts_of(task.get("description", ""))) >= 2:
        return "split"
    expertise = task.get("required_expertise") or ""
    if not expertise or expertise in agent.get("expertise", []):
        return "do"
    return "route"


def _placeholder(task: dict, agent: dict) -> str:
    return (
        f"{BANNER}\n{agent['name']} ({agent.get('role') or 'agent'}) did: {task['title']}. "
        "A placeholder result: a real model would have done the work and reported it here."
    )


def _summary(task: dict) -> tuple[str, str]:
    """(status, result) of a parent whose subtasks are all finished."""
    subtasks = task["subtasks"]
    completed = [s for s in subtasks if s["status"] == "completed"]
    lines = [f"{BANNER}", f"The {len(subtasks)} subtask(s) of “{task['title']}”:"]
    for s in subtasks:
        first = (s["result"] or "").replace(BANNER, "").strip().splitlines()
        lines.append(
            f"- #{s['id']} {s['title']} ({s['status']}, {s['holder'] or 'nobody'})"
            + (f": {first[0][:200]}" if first else "")
        )
    return ("completed" if completed else "failed"), "\n".join(lines)


def _decision_fields(recommendation: dict) -> dict:
    primary = recommendation.get("primary_choice") or {}
    fallback = recommendation.get("fallback") or {}
    fields = {
        "primary_reason": (primary.get("reason") or "")[:MAX_NOTE],
        "reasoning": (recommendation.get("reasoning") or "")[:MAX_NOTE],
        "notes": "Followed recommend_delegate (offline provider).",
    }
    if fallback:
        fields["fallback"] = f"{fallback.get('name')}: {fallback.get('reason', '')}"[:MAX_NOTE]
    return fields


def _move(task_id: int, step: str, recommendation: dict) -> ToolCall:
    """Seed 001's decision as the tool call that makes it."""
    decision = recommendation.get("decision")
    primary = recommendation.get("primary_choice") or {}
    fields = _decision_fields(recommendation)
    if decision == "DELEGATE" and primary.get("id"):
        return _call(
            task_id, step, "delegate_task", task_id=task_id, agent_id=primary["id"], **fields
        )
    if decision == "QUEUE" and primary.get("id"):
        wait = primary.get("estimated_wait_seconds")
        extra = {"wait_time_seconds": wait} if isinstance(wait, int) else {}
        return _call(
            task_id, step, "queue_task", task_id=task_id, agent_id=primary["id"], **fields, **extra
        )
    return _call(
        task_id,
        step,
        "escalate_task",
        task_id=task_id,
        reason=(recommendation.get("reasoning") or "No one fits.")[:MAX_NOTE],
        **{k: v for k, v in fields.items() if k != "reasoning"},
    )


def _route(task: dict, seen: Conversation) -> tuple[list[ToolCall], str]:
    tid = task["id"]
    rec, move, again, block = (f"rt-{tid}-{s}" for s in ("rec", "move", "again", "block"))
    if not seen.made(rec):
        exclude = list(task.get("delegation_chain") or [])
        return [
            _call(
                tid,
                "rec",
                "recommend_delegate",
                expertise=task["required_expertise"],
                urgency=task["urgency"],
                exclude=exclude,
            )
        ], ""
    if not seen.ok(rec):
        refusal = seen.value(rec)
        note = f"No recommendation: {json.dumps(refusal)}"[:MAX_NOTE]
        return _start(task) + [
            _call(tid, "block", "update_task_status", task_id=tid, status="blocked", note=note)
        ], ""
    if not seen.made(move):
        return [_move(tid, "move", seen.value(rec))], ""
    if seen.ok(move):
        return [], _moved(task, seen.calls[move])
    if not seen.made(again):
        if seen.calls[move].name == "escalate_task":
            return _blocked(task, seen, move, again, block)
        refusal = (seen.value(move) or {}).get("error", "refused")
        return [
            _call(
                tid,
                "again",
                "escalate_task",
                task_id=tid,
                reason=f"My routing was refused: {refusal}"[:MAX_NOTE],
            )
        ], ""
    if seen.ok(again):
        return [], _moved(task, seen.calls[again])
    return _blocked(task, seen, again, again, block)


def _blocked(task, seen, failed, again, block) -> tuple[list[ToolCall], str]:
    tid = task["id"]
    if not seen.made(block):
        refusal = (seen.value(failed) or {}).get("error", "refused")
        note = f"Could not route it: {refusal}"[:MAX_NOTE]
        return _start(task) + [
            _call(tid, "block", "update_task_status", task_id=tid, status="blocked", note=note)
        ], ""
    return [], f"#{tid}: could not route it; blocked."


def _moved(task: dict, call: ToolCall) -> str:
    words = {
        "delegate_task": "delegated to",
        "queue_task": "queued for",
        "escalate_task": "escalated",
    }
    who = call.arguments.get("agent_id", "")
    return f"#{task['id']} {task['title']}: {words.get(call.name, call.name)} {who}".rstrip() + "."


def _split(task: dict, seen: Conversation) -> tuple[list[ToolCall], str]:
    tid = task["id"]
    parts = parts_of(task["description"])
    if not seen.made(f"rt-{tid}-sub1"):
        calls = []
        for k, (title, expertise) in enumerate(parts, start=1):
            calls.append(
                _call(
                    tid,
                    f"rec{k}",
                    "recommend_delegate",
                    expertise=expertise,
                    urgency=task["urgency"],
                )
            )
            calls.append(
                _call(
                    tid,
                    f"sub{k}",
                    "create_subtask",
                    parent=tid,
                    title=title,
                    required_expertise=expertise,
                    urgency=task["urgency"],
                    description=f"Part {k} of task #{tid}: {task['title']}.",
                )
            )
        return calls, ""
    calls = []
    for k in range(1, len(parts) + 1):
        sub, rec, step = f"rt-{tid}-sub{k}", f"rt-{tid}-rec{k}", f"pass{k}"
        if seen.ok(sub) and seen.ok(rec) and not seen.made(f"rt-{tid}-{step}"):
            calls.append(_move(seen.value(sub)["id"], step, seen.value(rec)))
            # The move names the subtask; its id says which parent step it is.
            calls[-1].id = f"rt-{tid}-{step}"
    if calls:
        return calls, ""
    made = sum(seen.ok(f"rt-{tid}-sub{k}") for k in range(1, len(parts) + 1))
    return [], f"#{tid} {task['title']}: split into {made} subtask(s), routed to their experts."


def _do(task: dict, agent: dict, seen: Conversation) -> tuple[list[ToolCall], str]:
    tid = task["id"]
    if not seen.made(f"rt-{tid}-do"):
        return _start(task) + [
            _call(
                tid,
                "do",
                "complete_task",
                task_id=tid,
                status="completed",
                result=_placeholder(task, agent),
            )
        ], ""
    if seen.ok(f"rt-{tid}-do"):
        return [], f"#{tid} {task['title']}: completed with a placeholder result."
    return [], f"#{tid} {task['title']}: could not complete it ({seen.value(f'rt-{tid}-do')})."


def _finish(task: dict, seen: Conversation) -> tuple[list[ToolCall], str]:
    tid = task["id"]
    if not seen.made(f"rt-{tid}-finish"):
        status, result = _summary(task)
        return _start(task) + [
            _call(tid, "finish", "complete_task", task_id=tid, status=status, result=result)
        ], ""
    verb = "finished" if seen.ok(f"rt-{tid}-finish") else "could not finish"
    return [], f"#{tid} {task['title']}: {verb} with the results of its subtasks."


def decide(request: LLMRequest, context: dict | None = None) -> tuple[str, list[ToolCall]]:
    """This turn's text and tool calls for the run of `request` (its conversation so far);
    `context` overrides the run's context read from the input (the benchmark's directors)."""
    messages = request.conversation()
    if context is None:
        first = next((m for m in messages if m.role == Role.USER), None)
        context = context_of(first.content if first else "")
    if context is None:
        return "No run context in the input: nothing to do.", []
    agent, seen = context["agent"], Conversation(messages)
    calls, said = [], []
    for task in context["tasks"]:
        if not task.get("you_hold_it") or task.get("status") not in HELD:
            continue
        plan = _plan(task, agent)
        if plan == "wait":
            progress = task["subtask_progress"]
            said.append(
                f"#{task['id']} {task['title']}: waiting for its subtasks "
                f"({progress['done']}/{progress['total']} done)."
            )
            continue
        more, text = {
            "finish": lambda t: _finish(t, seen),
            "split": lambda t: _split(t, seen),
            "do": lambda t: _do(t, agent, seen),
            "route": lambda t: _route(t, seen),
        }[plan](task)
        calls += more
        if text:
            said.append(text)
    if calls:
        return f"{agent['name']} works on {len(context['tasks'])} task(s).", calls
    return "\n".join(said) or "Nothing of mine to act on.", []


def routine(request: LLMRequest) -> tuple[str, list[ToolCall]]:
    return decide(request)
