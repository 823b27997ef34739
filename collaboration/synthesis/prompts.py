"""The prompts of a session: a specialist's, the coordinator's plan, synthesis and judgement."""

import json

from .base import Answer


def format_context(context: dict) -> str:
    return "\n".join(
        f"- {k}: {v if isinstance(v, str) else json.dumps(v, default=str)}"
        for k, v in context.items()
    )


def format_answers(answers: list[Answer]) -> str:
    return "\n\n".join(f"### {a.agent} ({a.role})\n{a.response}" for a in answers)


def agent_prompt(
    *,
    task: str,
    role: str,
    focus: str,
    context: dict,
    previous: list[Answer],
    ask_verdict: bool,
    subtask: str = "",
    whole_task_note: str = "",
) -> str:
    """Seed 004's specialist prompt, plus the VERDICT/CONFIDENCE lines we parse."""
    parts = [f"## Task\n{task}"]
    if subtask:
        parts.append(f"## Your Assignment (from the coordinator)\n{subtask}")
    elif whole_task_note:
        parts.append(f"## Your Assignment\n{whole_task_note}")
    if focus:
        parts.append(f"## Your Focus\n{focus}")
    if context:
        parts.append(f"## Context\n{format_context(context)}")
    if previous:
        parts.append(f"## Previous Analysis\n{format_answers(previous)}")
    ending = (
        "End your answer with two lines:\nVERDICT: <your one-line decision, e.g. yes or no>\n"
        "CONFIDENCE: <a number from 0 to 1>"
        if ask_verdict
        else "End your answer with the line:\nCONFIDENCE: <a number from 0 to 1>"
    )
    parts.append(
        f"## Instructions\nYou are a {role} specialist. Analyze the task from your expert "
        "perspective.\nProvide specific, actionable insights based on your expertise.\n"
        f"Be thorough but focused on your domain.\n{ending}"
    )
    return "\n\n".join(parts)


def plan_prompt(
    *, task: str, context: dict, specialists: list[dict], focus: str = "", error: str = ""
) -> str:
    """The coordinator's planning prompt; `focus` is the coordinator's own (seed 004's example:
    "decompose task, assign to specialists, synthesize")."""
    names = json.dumps([s["name"] for s in specialists])
    roster = "\n".join(
        f"- {s['name']} ({s['role']}){': ' + s['focus'] if s['focus'] else ''}" for s in specialists
    )
    parts = [f"## Task\n{task}"]
    if focus:
        parts.append(f"## Your Focus\n{focus}")
    if context:
        parts.append(f"## Context\n{format_context(context)}")
    parts.append(f"## Specialists\n{roster}")
    parts.append(
        "## Your Task\nYou coordinate these specialists. Decompose the task into one subtask per "
        "specialist who should work on it; a specialist you assign nothing is skipped. Answer with JSON only, no prose, in exactly this "
        'shape:\n{"plan": "<one paragraph>", "assignments": [{"agent": "<name>", '
        f'"subtask": "<what this specialist must do>"}}]}}\nThe agent names must be taken from {names}.'
    )
    if error:
        parts.append(
            f"## Your previous answer was rejected\n{error}\nAnswer again with valid JSON only."
        )
    return "\n\n".join(parts)


def synthesis_prompt(task: str, answers: list[Answer]) -> str:
    """Seed 004's coordinator synthesis prompt."""
    return f"""You are synthesizing contributions from multiple specialist agents.

## Original Task
{task}

## Specialist Contributions

{format_answers(answers)}

## Your Task
Synthesize these perspectives into a unified, coherent response:
1. Identify key agreements across specialists
2. Highlight important disagreements or tensions
3. Resolve conflicts with reasoned judgment
4. Provide actionable conclusions
5. Note any gaps or areas needing further analysis

Provide a comprehensive synthesis that leverages the strengths of each perspective.
"""


def judge_prompt(task: str, candidates: list[Answer]) -> str:
    names = ", ".join(a.agent for a in candidates)
    return (
        f"## Original Task\n{task}\n\n## Candidate Answers (equally confident)\n"
        f"{format_answers(candidates)}\n\n## Your Task\nPick the single best answer to the task. "
        f"Reply with one line `BEST: <agent>` where <agent> is one of: {names}."
    )
