"""Notices: more reasons a task's page opens on, each a function of the task and a line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import reverse

from costs.budgets import blocking_budget
from costs.holds import hold_reason
from tasks.models import HELD_STATUSES, Task


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
