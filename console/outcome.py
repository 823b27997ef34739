"""A collaboration's outcome in words: the verdicts and the dissent, a card per agent with its
answer, tool calls and cost, and the session's events."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Sum
from django.db.models.functions import Coalesce

from collaboration.models import CollaborationSession, ContributionStatus
from collaboration.selectors import session_total_tokens
from collaboration.synthesis.parsing import first_sentence
from costs.models import ZERO, UsagePurpose, UsageRecord
from costs.selectors import MONEY_ZERO
from organization.admin.display import human

from .words import duration, readable, usd

# How many of a session's events its page lists (the API has them all).
EVENTS_SHOWN = 300


@dataclass
class AgentCard:
    name: str
    role: str
    status: str
    answer: str
    verdict: str
    confidence: str
    tokens: int
    duration: str
    error: str
    tool_calls: str = ""
    dissents: bool = False
    cost: str = ""


def verdict_summary(contributions) -> tuple[str, str, set[str]]:
    """("2 yes, 1 no — 67 % agreement", "the dissent: …", keys of the dissenters)."""
    voted = [
        c for c in contributions if c.status == ContributionStatus.COMPLETED and c.verdict.strip()
    ]
    if not voted:
        return "No agent gave a verdict.", "", set()
    tally = Counter(c.verdict.strip().lower() for c in voted)
    ranked = tally.most_common()
    counts = ", ".join(f"{n} {verdict}" for verdict, n in ranked)
    top = ranked[0][1]
    tied = len([v for v, n in ranked if n == top]) > 1
    agreement = round(100 * top / len(voted))
    summary = f"{counts} — {agreement} % agreement" + (" (tied)" if tied else "")
    if tied:
        return summary, "", set()
    majority = ranked[0][0]
    dissenters = [c for c in voted if c.verdict.strip().lower() != majority]
    dissent = "; ".join(
        f"{c.display_name or c.agent_key} ({c.verdict}): {first_sentence(c.response)}"
        for c in dissenters
    )
    return summary, dissent, {c.agent_key for c in dissenters}


def tool_calls_of(contribution) -> str:
    """Each call of an agent with tools, a line each, in words: its name, its arguments as
    `name: value` and how it went (done, refused with the error's code, or still running)."""

    def said(value) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def went(call) -> str:
        if call["status"] == "error":
            return f"refused ({(call.get('error') or {}).get('code', 'error')})"
        return "done" if call["status"] == "ok" else "running"

    return "\n".join(
        t["name"]
        + "".join(f", {k}: {said(v)}" for k, v in (t.get("arguments") or {}).items())
        + f" → {went(t)}"
        for t in contribution.turns or []
        if t.get("kind") == "tool_call"
    )


# The coordinator's own calls (the synthesis, a best_of judgement), whatever their label.
COORDINATOR_PURPOSES = (UsagePurpose.SYNTHESIS, UsagePurpose.JUDGE)


def collaboration_outcome(session: CollaborationSession) -> dict:
    contributions = list(session.contributions.order_by("position"))
    summary, dissent, dissenters = verdict_summary(contributions)
    # What each one's model calls cost, from the ledger (one query; the coordinator's too). The
    # coordinator's calls are told by their purpose, not their label: an agent of the session
    # may be named "coordinator" (seed 004's hierarchical example is).
    costs: dict[str, Decimal] = {}
    coordinator_cost = None
    rows = (
        UsageRecord.objects.filter(session=session)
        .values("label", "purpose")
        .annotate(total=Coalesce(Sum("cost_usd"), MONEY_ZERO))
        .values_list("label", "purpose", "total")
    )
    for label, purpose, total in rows:
        if purpose in COORDINATOR_PURPOSES:
            coordinator_cost = (coordinator_cost or ZERO) + total
        else:
            costs[label] = costs.get(label, ZERO) + total
    cards = [
        AgentCard(
            name=c.display_name or c.agent_key,
            role=c.role,
            status=human(c.status),
            answer=c.response,
            verdict=c.verdict,
            confidence=f"{c.confidence:.0%}" if c.confidence is not None else "",
            tokens=c.tokens_used,
            duration=duration(c.duration_ms / 1000) if c.duration_ms is not None else "",
            error=c.error,
            tool_calls=tool_calls_of(c),
            dissents=c.agent_key in dissenters,
            cost=usd(costs.get(c.agent_key)),
        )
        for c in contributions
    ]
    events = [
        (e.name, e.created_at, ", ".join(f"{k}: {v}" for k, v in readable(e.data)))
        for e in session.events.order_by("id")[:EVENTS_SHOWN]
    ]
    return {
        "events": events,
        "summary": summary,
        "dissent": dissent,
        "cards": cards,
        "tokens": session_total_tokens(session, contributions),
        "cost": usd(sum(costs.values(), coordinator_cost or ZERO)),
        "coordinator_cost": usd(coordinator_cost),
        "took": duration((session.finished_at - session.started_at).total_seconds())
        if session.finished_at and session.started_at
        else "",
    }
