"""The banner of an escalated or blocked task: who moved it there, why, and who could take it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from costs.holds import hold_reason, holding_budgets
from organization.models import Agent
from organization.selectors import agents_with_workload
from organization.workload import status_for
from tasks.models import Task, TaskEvent, TaskStatus
from tasks.recommend import TIER_NAMES, recommend
from tasks.selectors import events_of

# How many suggested assignees the banner offers.
SUGGESTED = 5
# A banner whose event is older than the shown timeline reads it from this many candidates.
BANNER_CANDIDATES = 20


def entered_state(events: list[TaskEvent], status: str) -> TaskEvent | None:
    """The event that moved the task into `status` last (its `after` says so, its `before` not)."""
    for event in reversed(events):
        after, before = event.after or {}, event.before or {}
        if after.get("status") == status and before.get("status") != status:
            return event
    return None


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
