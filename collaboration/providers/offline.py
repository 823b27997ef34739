"""A deterministic provider for machines without an LLM key: it says so in every answer.

It still exercises every mode and synthesis: specialists end with VERDICT/CONFIDENCE lines derived
from a hash of their name and task, a hierarchical coordinator answers with a valid JSON plan for
the named specialists, and a synthesis lists what it was given.
"""

import hashlib
import json

from .base import LLMReply, LLMRequest, Provider, Purpose

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
            "",
            f"VERDICT: {verdict}",
            f"CONFIDENCE: {confidence:.2f}",
        ]
    )


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


def complete(request: LLMRequest) -> LLMReply:
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
