"""The bounds of wake chains: a wake-up another run's act caused is held past them.

docs/runtime.md, "Why wake chains are bounded this way", says why these bounds and not others.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from tasks.models import Task

from ..models import HeldReason, RunTrigger

COMMENT = "comment"
AGENT_TALK_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class Cause:
    """The run whose act woke an agent: its depth in its chain of wake-ups, and how many runs
    the woken agent had in the last hour (up to the bound)."""

    run_id: int
    depth: int
    agent_runs_this_hour: int


def _agents_talking_too_much(task: Task | None) -> bool:
    """Comments on the task have woken managed agents RUNTIME_MAX_AGENT_COMMENT_WAKES times in
    the last hour."""
    if task is None:
        return False
    wakes = RunTrigger.objects.filter(
        task=task,
        trigger=COMMENT,
        woken_by__isnull=False,
        created_at__gte=timezone.now() - AGENT_TALK_WINDOW,
    ).count()
    return wakes >= settings.RUNTIME_MAX_AGENT_COMMENT_WAKES


def bound_passed(cause: Cause | None, trigger: str, task: Task | None) -> str:
    """The bound a wake-up caused by another run's act would pass (a HeldReason), or "".
    A human's or an outside agent's act is never held: it starts a chain of its own."""
    if cause is None:
        return ""
    if cause.depth >= settings.RUNTIME_MAX_CHAIN_RUNS:
        return HeldReason.CHAIN
    if cause.agent_runs_this_hour >= settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR:
        return HeldReason.AGENT_HOUR
    if trigger == COMMENT and _agents_talking_too_much(task):
        return HeldReason.COMMENTS
    return ""
