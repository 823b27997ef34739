"""A task told as a story: its timeline, the banner and notices it opens on, its result, its
comments and cost. Plain data for the template, which escapes every value."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, QuerySet, Window

from costs.selectors import cost_of_task_tree
from organization.admin.actors import actor_words, key_names
from organization.admin.display import human
from tasks.models import EventKind, Task, TaskEvent
from tasks.selectors import comments_of, events_of, subtasks_of

from .banner import banner_of
from .notices import notices_of
from .words import duration, readable, usd

# How many of a task's latest events and comments its page tells: an agent in a loop can write
# thousands of either (the task events list and GET /api/tasks/<id>/comments have them all).
MOMENTS_SHOWN = 200
COMMENTS_SHOWN = 100


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


# An audit row's message for a status change: "agent-jordan: in_progress → blocked. <note>".
STATUS_MOVE = re.compile(
    r"(?P<who>[^:]+): (?P<before>[a-z_]+) → (?P<after>[a-z_]+)\.(?P<rest>.*)", re.S
)


def status_sentence(sentence: str) -> str:
    """A status change said in words: "agent-jordan moved it from in progress to blocked."."""
    move = STATUS_MOVE.fullmatch(sentence)
    if move is None:
        return sentence
    return (
        f"{move['who']} moved it from {human(move['before']).lower()} to "
        f"{human(move['after']).lower()}.{move['rest']}"
    )


def told_in_words(story: dict, organization_id: int) -> dict:
    """The story with status changes in words and each organization key that acted said by its
    name (one query at most)."""
    banner, moments, comments = story["banner"], story["moments"], story["comments"]
    for moment in moments:
        if moment.kind == EventKind.STATUS_CHANGED:
            moment.sentence = status_sentence(moment.sentence)
    texts = [m.sentence for m in moments] + [c.author_label for c in comments]
    names = key_names(
        organization_id=organization_id, texts=texts + ([banner.who] if banner else [])
    )
    if not names:
        return story
    for moment in moments:
        moment.sentence = actor_words(moment.sentence, names)
    for comment in comments:
        comment.author_label = actor_words(comment.author_label, names)
    if banner is not None:
        banner.who = actor_words(banner.who, names)
    return story
