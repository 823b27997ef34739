"""Pure functions of synthesis: prompts, VERDICT/CONFIDENCE parsing, consensus, vote, merge, best_of.

`Answer` is the read-only view of a finished contribution these functions work on, so they can be
tested without a database or a provider.
"""

import json
import re
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

VERDICT_RE = re.compile(r"^[\s>*_#-]*VERDICT[\s*_]*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
CONFIDENCE_RE = re.compile(
    r"^[\s>*_#-]*CONFIDENCE[\s*_]*[:：]\s*[*_]*\s*([0-9]+(?:\.[0-9]+)?)\s*(%)?",
    re.IGNORECASE | re.MULTILINE,
)
BEST_RE = re.compile(r"^[\s>*_#-]*BEST[\s*_]*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
WORD_RE = re.compile(r"[a-z][a-z0-9'-]{3,}")
# Words too common to say anything about agreement.
STOPWORDS = frozenset(
    """
    about above after again also because been before being below between both could does doing
    down during each from further have having here into itself just more most once only other
    over same should some such than that their them then there these they this those through
    under until very were what when where which while will with would your yours offline
    provider verdict confidence
    """.split()
)
# Verdict spellings that mean the same decision.
SYNONYMS = {
    "yes": "yes", "y": "yes", "approve": "yes", "approved": "yes", "accept": "yes",
    "accepted": "yes", "agree": "yes", "lgtm": "yes", "go": "yes", "true": "yes", "ship": "yes",
    "no": "no", "n": "no", "reject": "no", "rejected": "no", "decline": "no", "disagree": "no",
    "block": "no", "blocked": "no", "no-go": "no", "nogo": "no", "false": "no",
}  # fmt: skip
# Without verdicts, agreement is the mean pairwise Jaccard similarity of the answers' word sets;
# above this the agents are said to agree (two unrelated texts typically score under 0.1).
TEXT_CONSENSUS_THRESHOLD = 0.3


@dataclass(frozen=True)
class Answer:
    agent: str
    role: str
    response: str
    confidence: float | None = None
    verdict: str = ""
    position: int = 0


def parse_verdict(text: str) -> str:
    """The last `VERDICT:` line, normalised ('' when there is none)."""
    found = VERDICT_RE.findall(text or "")
    return normalise_verdict(found[-1]) if found else ""


def normalise_verdict(raw: str) -> str:
    cleaned = re.sub(r"[*_`\"'“”.!]+", "", raw).strip().lower()
    cleaned = re.sub(r"\s+", " ", cleaned)
    first = re.split(r"[\s,;:(—–-]+", cleaned, maxsplit=1)[0] if cleaned else ""
    if first in SYNONYMS:
        return SYNONYMS[first]
    if cleaned in SYNONYMS:
        return SYNONYMS[cleaned]
    # "Microservices, for scale" and "microservices (later)" are the same vote: keep the clause.
    head = re.split(r"\s*[,;:(—–]\s*|\s+-\s+|\s+because\s+", cleaned)[0]
    return " ".join(head.split()[:6])[:100]


def parse_confidence(text: str) -> float | None:
    """The last `CONFIDENCE:` line as 0..1 (`80%` and `80` mean 0.8), or None."""
    found = CONFIDENCE_RE.findall(text or "")
    if not found:
        return None
    number, percent = found[-1]
    value = float(number)
    if percent or value > 1:
        value /= 100
    return max(0.0, min(1.0, value))


def words_of(text: str) -> set[str]:
    return {w for w in WORD_RE.findall((text or "").lower()) if w not in STOPWORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


# How a vote was decided: by the most votes, or, between verdicts with as many votes, by the
# higher summed confidence, then by the earliest agent.
MAJORITY, CONFIDENCE_TIE_BREAK, ORDER_TIE_BREAK = (
    "majority",
    "confidence_tie_break",
    "order_tie_break",
)


def confidence_of(answers: list[Answer], verdict: str) -> float:
    return sum(a.confidence or 0 for a in answers if a.verdict == verdict)


def vote_decision(answers: list[Answer]) -> tuple[str, Counter, str]:
    """(winning verdict, tally, how it was decided); ('', empty, '') when nobody voted."""
    voted = [a for a in answers if a.verdict]
    tally = Counter(a.verdict for a in voted)
    if not tally:
        return "", tally, ""

    def rank(verdict: str):
        first = min(a.position for a in voted if a.verdict == verdict)
        return (tally[verdict], confidence_of(voted, verdict), -first)

    winner = max(tally, key=rank)
    tied = [v for v in tally if tally[v] == tally[winner]]
    if len(tied) == 1:
        return winner, tally, MAJORITY
    weights = [confidence_of(voted, v) for v in tied]
    decided = CONFIDENCE_TIE_BREAK if weights.count(max(weights)) == 1 else ORDER_TIE_BREAK
    return winner, tally, decided


def majority_verdict(answers: list[Answer]) -> tuple[str, Counter]:
    """Most frequent verdict; a tie goes to the higher summed confidence, then the earliest."""
    winner, tally, _ = vote_decision(answers)
    return winner, tally


def consensus_of(answers: list[Answer]) -> dict:
    """Seed 004's consensus object, computed for real (the seed's is a placeholder)."""
    result = {
        "agents_count": len(answers),
        "has_consensus": False,
        "agreement_score": None,
        "key_agreements": [],
        "key_disagreements": [],
        "method": None,
    }
    if not answers:
        return result
    majority, tally, decided_by = vote_decision(answers)
    if tally:
        voted = sum(tally.values())
        score = tally[majority] / voted
        result.update(
            method="verdict_majority",
            decided_by=decided_by,
            agreement_score=round(score, 3),
            has_consensus=score > 0.5,
            majority_verdict=majority,
            verdicts=dict(tally),
            key_agreements=[
                f"{tally[majority]} of {voted} agents: {majority} "
                f"({', '.join(a.agent for a in answers if a.verdict == majority)})"
            ],
            key_disagreements=[
                f"{a.agent} ({a.role}): {a.verdict or 'no verdict'}"
                for a in answers
                if a.verdict != majority
            ],
        )
        return result
    sets = [words_of(a.response) for a in answers]
    if len(answers) == 1:
        score = 1.0
    else:
        pairs = list(combinations(range(len(sets)), 2))
        score = sum(jaccard(sets[i], sets[j]) for i, j in pairs) / len(pairs)
    counts = Counter(w for s in sets for w in s)
    need = len(sets) // 2 + 1
    shared = sorted((w for w, n in counts.items() if n >= need), key=lambda w: (-counts[w], w))
    result.update(
        method="jaccard_word_overlap",
        threshold=TEXT_CONSENSUS_THRESHOLD,
        agreement_score=round(score, 3),
        has_consensus=score >= TEXT_CONSENSUS_THRESHOLD,
        key_agreements=[f"shared by {counts[w]} of {len(sets)} agents: {w}" for w in shared[:8]]
        if len(sets) > 1
        else [],
        key_disagreements=[
            f"only {a.agent} raises: {', '.join(sorted(s - set().union(*(o for o in sets if o is not s)))[:5])}"
            for a, s in zip(answers, sets, strict=True)
            if len(sets) > 1 and s - set().union(*(o for o in sets if o is not s))
        ],
    )
    return result


def first_sentence(text: str, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        line = line.strip().lstrip("#>*- ").strip()
        if line and not line.startswith("[offline provider") and not VERDICT_RE.match(line):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def merge_result(answers: list[Answer]) -> str:
    """Seed 004's merge: one section per agent."""
    return "\n\n---\n\n".join(f"### {a.agent} ({a.role})\n\n{a.response}" for a in answers)


def vote_result(answers: list[Answer], consensus: dict) -> str:
    """Consensus points, divergent views and the conclusion: the majority's, or a tie's."""
    majority, tally, decided_by = vote_decision(answers)
    tied = sorted(v for v in tally if tally[v] == tally[majority]) if tally else []
    if len(tied) > 1:
        # A tie is no consensus, whatever the tie-break then picks.
        lines = ["## Consensus (none: the vote is tied)"]
        lines.append(
            f"- {' / '.join(tied)}: {tally[majority]} of {sum(tally.values())} agents each"
        )
    else:
        points = len(consensus["key_agreements"])
        lines = [f"## Consensus ({points} point{'' if points == 1 else 's'})"]
        lines += [f"- {p}" for p in consensus["key_agreements"]] or ["- none"]
    lines.append("")
    lines.append("## Divergent Views")
    divergent = [a for a in answers if a.verdict != majority] if tally else []
    if divergent:
        for a in divergent:
            conf = f", confidence {a.confidence:.2f}" if a.confidence is not None else ""
            lines.append(
                f"- {a.agent} ({a.role}): {a.verdict or 'no verdict'}{conf} — {first_sentence(a.response)}"
            )
    elif consensus["key_disagreements"]:
        lines += [f"- {d}" for d in consensus["key_disagreements"]]
    else:
        lines.append("- none")
    lines.append("")
    if decided_by == CONFIDENCE_TIE_BREAK:
        others = ", ".join(f"{v} {confidence_of(answers, v):.2f}" for v in tied if v != majority)
        lines.append("## Conclusion (tie broken by confidence)")
        lines.append(
            f"VERDICT: {majority} — tied at {tally[majority]} of {sum(tally.values())} agents "
            f"each; the higher summed confidence decided ({majority} "
            f"{confidence_of(answers, majority):.2f} against {others})."
        )
    elif decided_by == ORDER_TIE_BREAK:
        lines.append("## Conclusion (tie broken by order)")
        lines.append(
            f"VERDICT: {majority} — tied at {tally[majority]} of {sum(tally.values())} agents "
            "each with equal confidence; the earliest agent's verdict decided."
        )
    else:
        lines.append("## Majority Conclusion")
    if tally:
        backers = [a for a in answers if a.verdict == majority]
        if decided_by == MAJORITY:
            voted = sum(tally.values())
            confidences = [a.confidence for a in backers if a.confidence is not None]
            mean = (
                f", mean confidence {sum(confidences) / len(confidences):.2f}"
                if confidences
                else ""
            )
            lines.append(
                f"VERDICT: {majority} — {tally[majority]} of {voted} agents "
                f"({tally[majority] / voted:.0%}){mean}."
            )
        lines += [f"- {a.agent}: {first_sentence(a.response)}" for a in backers]
    else:
        lines.append("No agent gave a VERDICT line, so there is no majority to report.")
    return "\n".join(lines)


def best_of_candidates(answers: list[Answer]) -> list[Answer]:
    """The answers sharing the highest confidence (all of them when none reported one)."""
    rated = [a for a in answers if a.confidence is not None]
    if not rated:
        return list(answers)
    top = max(a.confidence for a in rated)
    return [a for a in rated if a.confidence == top]


def parse_best(text: str, names: list[str]) -> str | None:
    found = BEST_RE.findall(text or "")
    if not found:
        return None
    choice = found[-1].strip().strip("*`\"'").strip()
    for name in names:
        if choice.lower() == name.lower():
            return name
    for name in names:
        if name.lower() in choice.lower():
            return name
    return None


def best_of_result(chosen: Answer, total: int, how: str) -> str:
    conf = f", confidence {chosen.confidence:.2f}" if chosen.confidence is not None else ""
    return f"## Best of {total}: {chosen.agent} ({chosen.role}{conf}; {how})\n\n{chosen.response}"


# --- prompts -------------------------------------------------------------------------------


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


def parse_plan(text: str, names: list[str]) -> tuple[dict | None, str]:
    """(plan, '') for a valid plan, else (None, why): malformed, empty or naming strangers."""
    raw = (text or "").strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", raw, re.DOTALL)
    if fenced:
        raw = fenced.group(1).strip()
    elif "{" in raw:
        raw = raw[raw.index("{") : raw.rindex("}") + 1] if "}" in raw else raw[raw.index("{") :]
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, ValueError) as exc:
        return None, f"The plan is not valid JSON ({exc.msg} at character {exc.pos})."
    if not isinstance(data, dict) or not isinstance(data.get("assignments"), list):
        return None, 'The plan must be an object with an "assignments" list.'
    assignments = {}
    for i, item in enumerate(data["assignments"]):
        if not isinstance(item, dict):
            return None, f"assignments[{i}] must be an object."
        agent, subtask = item.get("agent"), item.get("subtask")
        if agent not in names:
            return None, f"assignments[{i}].agent {agent!r} is not one of the specialists {names}."
        if not isinstance(subtask, str) or not subtask.strip():
            return None, f"assignments[{i}].subtask must be a non-empty string."
        if agent in assignments:
            assignments[agent] += "\n" + subtask.strip()
        else:
            assignments[agent] = subtask.strip()
    if not assignments:
        return None, "The plan assigns nothing to anyone."
    plan = data.get("plan")
    return {"plan": plan if isinstance(plan, str) else "", "assignments": assignments}, ""


def plan_text(plan: dict) -> str:
    """What the coordinator contributes: its plan paragraph, else its assignments in words."""
    if plan.get("plan", "").strip():
        return plan["plan"].strip()
    return "\n".join(f"- {agent}: {subtask}" for agent, subtask in plan["assignments"].items())


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
