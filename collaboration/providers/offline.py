"""A deterministic provider for machines without an LLM key: it says so in every answer.

It plays every mode, synthesis and tool; a request's `offline_routine` answers instead if given."""

import hashlib
import json

from .base import LLMReply, LLMRequest, Provider, Purpose, Role, Routine, StopReason, ToolCall

BANNER = "[offline provider: deterministic placeholder output, no language model was called]"


def _digest(*parts: str) -> int:
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest(), 16)


def _first_line(text: str, limit: int = 120) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _agent_answer(request: LLMRequest) -> str:
    hints = request.hints
    task = hints.get("task", "")
    focus = hints.get("focus") or hints.get("role") or "the task as a whole"
    h = _digest(request.label, task)
    verdict = ("yes", "yes", "no")[h % 3]
    confidence = 0.55 + (h >> 8) % 40 / 100
    return "\n".join(
        [
            BANNER,
            "",
            f"{request.label} looked at: {_first_line(task)}",
            f"- Focus: {focus}.",
            f"- Offline note {h % 1000:03d}: a real provider would analyse this from the "
            f"{hints.get('role') or 'specialist'} angle.",
            *_consulted(request),
            "",
            f"VERDICT: {verdict}",
            f"CONFIDENCE: {confidence:.2f}",
        ]
    )


def _consulted(request: LLMRequest) -> list[str]:
    """A line per tool result in the conversation: which tool, and whether it answered."""
    conversation = request.conversation()
    names = {
        call.id: call.name
        for message in conversation
        if message.role == Role.ASSISTANT
        for call in message.tool_calls
    }
    return [
        f"- Consulted {names.get(m.tool_call_id, m.tool_call_id)}: "
        + ("refused — " + _first_line(m.content, 200) if m.is_error else "answered.")
        for m in conversation
        if m.role == Role.TOOL
    ]


def _tool_calls_for(request: LLMRequest) -> list[ToolCall]:
    """The calls of the first turn: each offered tool that needs no argument, called without."""
    if not request.tools or any(m.role == Role.TOOL for m in request.conversation()):
        return []
    return [
        ToolCall(id=f"offline-call-{n}", name=tool.name, arguments={})
        for n, tool in enumerate(
            (t for t in request.tools if not t.input_schema.get("required")), start=1
        )
    ]


def _plan(request: LLMRequest) -> str:
    task = request.hints.get("task", "")
    assignments = [
        {
            "agent": s["name"],
            "subtask": f"{_first_line(task)} (from the {s.get('role') or 'specialist'} angle: "
            f"{s.get('focus') or 'your expertise'})",
        }
        for s in request.hints.get("specialists", [])
    ]
    return json.dumps(
        {"plan": f"{BANNER} One subtask per specialist.", "assignments": assignments}, indent=2
    )


def _synthesis(request: LLMRequest) -> str:
    lines = [
        BANNER,
        "",
        f"Synthesis of {len(request.hints.get('contributions', []))} contributions:",
    ]
    for c in request.hints.get("contributions", []):
        lines.append(f"- {c['agent']}: {_first_line(c['summary'])}")
    return "\n".join(lines)


def _judge(request: LLMRequest) -> str:
    candidates = request.hints.get("candidates") or [""]
    return f"{BANNER}\nBEST: {candidates[0]}"


def _routine_reply(routine: Routine, request: LLMRequest) -> LLMReply:
    text, tool_calls = routine(request)
    return LLMReply(
        text=f"{BANNER}\n{text}" if text else BANNER,
        provider=Provider.OFFLINE,
        model=Provider.OFFLINE,
        tool_calls=list(tool_calls),
        stop_reason=StopReason.TOOL_CALLS if tool_calls else StopReason.STOP,
    )


def complete(request: LLMRequest) -> LLMReply:
    if request.offline_routine is not None:
        return _routine_reply(request.offline_routine, request)
    tool_calls = _tool_calls_for(request)
    if tool_calls:
        names = ", ".join(call.name for call in tool_calls)
        return LLMReply(
            text=f"{BANNER}\nConsulting the organization's tools: {names}.",
            provider=Provider.OFFLINE,
            model=Provider.OFFLINE,
            tool_calls=tool_calls,
            stop_reason=StopReason.TOOL_CALLS,
        )
    answer = {Purpose.PLAN: _plan, Purpose.SYNTHESIS: _synthesis, Purpose.JUDGE: _judge}.get(
        request.purpose, _agent_answer
    )(request)
    # No model was called, so no token was spent: reporting word counts would bill the budget
    # (and the usage totals) for nothing.
    return LLMReply(
        text=answer,
        prompt_tokens=0,
        completion_tokens=0,
        attempts=1,
        provider=Provider.OFFLINE,
        model=Provider.OFFLINE,  # its one model bears its name
    )
