"""What is read out of a model's reply: VERDICT, CONFIDENCE and BEST lines, a plan, a summary line.

Pure functions of text, tested without a database or a provider.
"""

import json
import re

VERDICT_RE = re.compile(r"^[\s>*_#-]*VERDICT[\s*_]*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
CONFIDENCE_RE = re.compile(
    r"^[\s>*_#-]*CONFIDENCE[\s*_]*[:：]\s*[*_]*\s*([0-9]+(?:\.[0-9]+)?)\s*(%)?"
    r"(?:\s*(?:/|out\s+of)\s*([0-9]+(?:\.[0-9]+)?))?",
    re.IGNORECASE | re.MULTILINE,
)
BEST_RE = re.compile(r"^[\s>*_#-]*BEST[\s*_]*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
# Verdict spellings that mean the same decision.
SYNONYMS = {
    "yes": "yes",
    "y": "yes",
    "approve": "yes",
    "approved": "yes",
    "accept": "yes",
    "accepted": "yes",
    "agree": "yes",
    "lgtm": "yes",
    "go": "yes",
    "true": "yes",
    "ship": "yes",
    "no": "no",
    "n": "no",
    "reject": "no",
    "rejected": "no",
    "decline": "no",
    "disagree": "no",
    "block": "no",
    "blocked": "no",
    "no-go": "no",
    "nogo": "no",
    "false": "no",
}


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
    """The last `CONFIDENCE:` line as 0..1 (`80%`, `80` and `8/10` mean 0.8), or None."""
    found = CONFIDENCE_RE.findall(text or "")
    if not found:
        return None
    number, percent, scale = found[-1]
    value = float(number)
    if scale and float(scale) > 0:
        value /= float(scale)  # "8/10", "4 out of 5"
    elif percent or value > 1:
        value /= 100
    return max(0.0, min(1.0, value))


def first_sentence(text: str, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        line = line.strip().lstrip("#>*- ").strip()
        if line and not line.startswith("[offline provider") and not VERDICT_RE.match(line):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


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
    except json.JSONDecodeError as exc:
        return None, f"The plan is not valid JSON ({exc.msg} at character {exc.pos})."
    except (ValueError, RecursionError):
        # A number past Python's 4,300 digits, arrays nested past its recursion limit.
        return None, "The plan is not JSON this service can read (a number too long or too deep)."
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
