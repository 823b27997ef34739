"""A task told as a story, and a collaboration's outcome in words (issue 13 §2).

Plain data for the console's templates, which escape every value: an agent's words (reasons,
notes, comments, answers) are shown as text, never as HTML.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, F, QuerySet, Sum, Window
from django.db.models.functions import Coalesce
from django.urls import reverse

from collaboration.models import CollaborationSession, ContributionStatus
from collaboration.selectors import session_total_tokens
from collaboration.synthesis.parsing import first_sentence
from costs.budgets import blocking_budget
from costs.holds import hold_reason, holding_budgets
from costs.models import ZERO, UsagePurpose, UsageRecord
from costs.selectors import MONEY_ZERO, cost_of_task_tree
from organization.admin.scoping import human
from organization.models import Agent
from organization.selectors import agents_with_workload
from organization.workload import status_for
from tasks.models import HELD_STATUSES, Task, TaskEvent, TaskStatus
from tasks.recommend import TIER_NAMES, recommend
from tasks.selectors import comments_of, events_of, subtasks_of

# How many suggested assignees the banner offers.
SUGGESTED = 5
# How many of a session's events its page lists (the API has them all).
EVENTS_SHOWN = 300
# How many of a task's events (its timeline) and comments its page tells: the latest, as the
# session's page cuts its events. An agent in a loop can write thousands of either (a comment
# holds up to 5,000 characters), and the page would grow with each (the task events list and
# GET /api/tasks/<id>/comments have them all).
MOMENTS_SHOWN = 200
COMMENTS_SHOWN = 100
# A banner whose event is older than the shown timeline reads it from this many candidates.
BANNER_CANDIDATES = 20


def duration(seconds: float | int | None) -> str:
    """12 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if seconds is None:
        return ""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


# --- the task's timeline -------------------------------------------------------------------


@dataclass
class Moment:
    """One line of the timeline: a sentence, then what the decision said (each a short line)."""

    when: datetime
    kind: str
    sentence: str
    details: list[tuple[str, str]] = field(default_factory=list)


def moment_of(event: TaskEvent) -> Moment:
    details = []
    if event.decision:
        chose = f"{event.decision}"
        if event.primary_choice:
            chose += f" → {event.primary_choice}"
        if event.primary_reason:
            chose += f": {event.primary_reason}"
        details.append(("Decision", chose))
    if event.reasoning:
        details.append(("Reasoning", event.reasoning))
    if event.fallback:
        details.append(("Fallback", event.fallback))
    if event.wait_time_seconds is not None:
        details.append(("Estimated wait", duration(event.wait_time_seconds)))
    if event.coordination_note:
        details.append(("Cross-team", event.coordination_note))
    if event.notes:
        details.append(("Note", event.notes))
    sentence = event.message or f"{event.actor_label}: {event.get_kind_display().lower()}."
    return Moment(event.created_at, event.kind, sentence, details)


def entered_state(events: list[TaskEvent], status: str) -> TaskEvent | None:
    """The event that moved the task into `status` last (its `after` says so, its `before` not)."""
    for event in reversed(events):
        if (event.after or {}).get("status") == status and (event.before or {}).get(
            "status"
        ) != status:
            return event
    return None


# --- the banner of an escalated or blocked task ---------------------------------------------

# What a suggestion's button does: assign to someone with room, or queue for a full expert.
ASSIGN, QUEUE = "assign", "queue"


@dataclass
class Suggestion:
    handle: str
    name: str
    team: str
    status: str
    load: str
    tier: str
    why: str
    expertise: list[str]
    action: str = ASSIGN
    # Why a budget holds this managed agent back (work given to them waits), if one does.
    held: str = ""


def _experts(task: Task, exclude: tuple[str, ...]) -> list[Suggestion]:
    """The recommendation's candidates for the task's expertise, a human asking: who has room
    (assign), then full experts (queue for them); whom a budget holds back last, saying so."""
    ranked = recommend(
        org=task.organization,
        agent=None,
        expertise=task.required_expertise,
        urgency=task.urgency,
        exclude=exclude,
    )
    candidates = [c for c in ranked["candidates"] if c["tier"] < 5][:SUGGESTED]
    expertise = dict(
        Agent.objects.filter(
            organization=task.organization, handle__in=[c["id"] for c in candidates]
        ).values_list("handle", "expertise")
    )
    return [
        Suggestion(
            c["id"],
            c["name"],
            c["team"] or "no team",
            c["status"],
            f"{c['current_workload']}/{c['workload_capacity']}",
            f"{c['tier']} · {c['tier_name'].replace('_', ' ')}",
            c["reason"].split(": ", 1)[-1],
            expertise.get(c["id"], []),
            QUEUE if c["tier_name"] == TIER_NAMES[4] else ASSIGN,
            c["held_for_budget"] or "",
        )
        for c in candidates
    ]


def _with_room(task: Task, exclude: list[str], shown: int) -> list[Suggestion]:
    """The least loaded agents online with room, `shown` at most."""
    agents = list(
        agents_with_workload(org=task.organization)
        .filter(is_paused=False)
        .exclude(handle__in=exclude)
        # In SQL: skipping full agents after a slice hid whoever had room behind them.
        .filter(current_workload__lt=F("workload_capacity"))
        .order_by("current_workload", "name")[:shown]
    )
    held = holding_budgets(agents)
    found = []
    for agent in agents:
        status = status_for(
            is_paused=False, workload=agent.current_workload, capacity=agent.workload_capacity
        )
        hold = hold_reason(held[agent.pk]) if agent.pk in held else ""
        found.append(
            Suggestion(
                agent.handle,
                agent.name,
                agent.team.name if agent.team_id else "no team",
                status,
                f"{agent.current_workload}/{agent.workload_capacity}",
                "—",
                "has room" + (f"; held for budget ({hold})" if hold else ""),
                agent.expertise,
                held=hold,
            )
        )
    return found


def suggestions(task: Task) -> tuple[list[Suggestion], str]:
    """Who could take the task: the agents with its expertise first (assign who has room, queue
    for who is full), then the least loaded agents online with room; and where they come from,
    in words."""
    exclude = (task.assignee.handle,) if task.assignee_id else ()
    experts = _experts(task, exclude) if task.required_expertise else []
    shown = [*exclude, *(s.handle for s in experts)]
    found = experts + _with_room(task, shown, SUGGESTED - len(experts))
    if not task.required_expertise:
        return found, "The task asks for no expertise: the least loaded agents online."
    if not experts:
        return found, (
            f"Nobody online has {task.required_expertise}: the least loaded agents online."
        )
    return found, (
        f"The agents with {task.required_expertise} first (seed 001's priorities: a full one "
        "is queued for), then the least loaded agents online with room."
    )


# --- notices: more reasons a task's page opens on ---------------------------------------------


@dataclass
class Notice:
    """A banner of its own above the story: why the task does not move, and where to act."""

    name: str  # pinned: the element's id is "notice-<name>"
    headline: str
    text: str
    link: str = ""
    link_label: str = ""


# Each a function of the task: its Notice, or None. Another reason is a function and a line.
NOTICES: list[Callable[[Task], Notice | None]] = []


def register_notice(function: Callable[[Task], Notice | None]):
    NOTICES.append(function)
    return function


def notices_of(task: Task) -> list[Notice]:
    return [n for n in (function(task) for function in NOTICES) if n is not None]


@register_notice
def held_for_budget(task: Task) -> Notice | None:
    """Its holder is a managed agent a budget holds back: no run of theirs starts, so the task
    waits until the limit is raised or the month turns (runtime `held_for_budget`)."""
    holder = task.assignee if task.assignee_id and task.status in HELD_STATUSES else None
    if holder is None or not holder.is_managed:
        return None
    budget = blocking_budget(holder)
    if budget is None:
        return None
    reason = hold_reason(budget)
    return Notice(
        "held-for-budget",
        f"Held for budget: {holder.name} cannot work on it.",
        f"{reason[0].upper()}{reason[1:]}. No run of {holder.name}'s starts until the limit is "
        "raised or the month turns; then it goes on by itself.",
        reverse("admin:costs_budget_change", args=[budget.pk]),
        "Open the budget",
    )


@dataclass
class Banner:
    status: str
    headline: str
    who: str
    when: datetime | None
    why: str
    suggestions: list[Suggestion]
    suggestions_from: str


def banner_of(task: Task, events: list[TaskEvent], every_event: bool = True) -> Banner | None:
    """The banner of an escalated or blocked task; `events` are its latest, oldest first (all of
    them unless `every_event` is False: then the event that moved it is looked up if older)."""
    if task.status not in (TaskStatus.ESCALATED, TaskStatus.BLOCKED):
        return None
    event = entered_state(events, task.status)
    if event is None and not every_event:
        moved = events_of(task).filter(after__status=task.status).reverse()[:BANNER_CANDIDATES]
        event = entered_state(list(moved)[::-1], task.status)
    who = event.actor_label if event else "unknown"
    why = ""
    if event is not None:
        why = event.reasoning or event.notes or event.message
    if task.status == TaskStatus.ESCALATED:
        headline = "Escalated to humans: no agent could take it. Assign it, answer, or cancel it."
    else:
        holder = task.assignee.name if task.assignee_id else "its holder"
        headline = f"Blocked: {holder} cannot go on. Reassign it, answer, or cancel it."
    found, source = suggestions(task)
    return Banner(
        task.status, headline, who, event.created_at if event else None, why, found, source
    )


# --- the whole story -------------------------------------------------------------------------


def readable(data) -> list[tuple[str, str]]:
    """A task's result data as label/value lines (nested values written compactly)."""
    if data in (None, {}, []):
        return []
    if not isinstance(data, dict):
        return [("value", json.dumps(data, ensure_ascii=False))]
    return [
        (
            str(key).replace("_", " "),
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
        )
        for key, value in data.items()
    ]


def latest(rows: QuerySet, shown: int) -> tuple[list, int]:
    """The last `shown` of `rows` (ordered oldest first), oldest first, and how many there are,
    in one query (a window's count is taken before the LIMIT)."""
    picked = list(rows.annotate(total=Window(Count("pk"))).reverse()[:shown])[::-1]
    return picked, picked[0].total if picked else 0


def task_story(task: Task) -> dict:
    events, events_total = latest(events_of(task), MOMENTS_SHOWN)
    comments, comments_total = latest(comments_of(task), COMMENTS_SHOWN)
    subtasks = subtasks_of(task)
    return {
        "banner": banner_of(task, events, every_event=events_total <= len(events)),
        "notices": notices_of(task),
        "moments": [moment_of(e) for e in events],
        "moments_total": events_total,
        "chain": " → ".join(task.delegation_chain or []),
        "result_data": readable(task.result_data),
        "subtasks": subtasks,
        "comments": comments,
        "comments_total": comments_total,
        # The model calls made for it and its subtasks (the ledger, one query).
        "cost": usd(cost_of_task_tree(task)),
    }


# --- a collaboration's outcome ----------------------------------------------------------------


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


def usd_figure(amount) -> str:
    """12.34 from a dollar up, 0.0123 under one (a model call costs fractions of a cent: two
    decimals showed most days as 0.00), 0.00 for nothing: every console page's money."""
    return f"{amount:,.2f}" if abs(amount) >= 1 or amount == 0 else f"{amount:.4f}"


def usd(amount) -> str:
    """$0.0123, $12.34; "" for no calls."""
    return "" if amount is None else f"${usd_figure(amount)}"


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
