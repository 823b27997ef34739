"""Subtasks: their open ones found and locked, and a parent told when its last one finishes."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count

from .. import events
from ..models import FINISHED_STATUSES, Task
from ..rules import Actor
from ..sql import LOCKED_WITH, NO_KEY


def tell_parent(task: Task, parent: Task | None, actor: Actor) -> None:
    """Tell the locked `parent`'s holder once `task` was its last open subtask to finish.

    The parent's row lock makes this exactly once; a finished parent is not told.
    """
    if parent is None or parent.status in FINISHED_STATUSES:
        return
    counts = Counter(
        dict(
            Task.objects.filter(parent=parent)
            .order_by()
            .values_list("status")
            .annotate(n=Count("pk"))
        )
    )
    if any(status not in FINISHED_STATUSES for status in counts):
        return
    events.subtasks_done_event(parent=parent, actor=actor, last=task, counts=counts)


def open_subtasks(task: Task, *, known: set[int] = frozenset()) -> list[int]:
    """The ids of the task's open subtasks at any depth (one query per level), but `known`.

    Finished subtasks are walked through: a completed subtask may still have open ones.
    """
    found, seen, level = [], {task.pk}, [task.pk]
    while level:
        rows = Task.objects.filter(parent_id__in=level).order_by().values_list("pk", "status")
        level = []
        for pk, status in rows:
            if pk in seen:  # a parent is set once at creation: only damaged data loops
                continue
            seen.add(pk)
            level.append(pk)
            if status not in FINISHED_STATUSES and pk not in known:
                found.append(pk)
    return found


def lock_open_subtasks(task: Task) -> list[Task]:
    """Lock the task's open subtasks (any depth, pk order, after the task's own lock).

    Searched again once locked, so a subtask created meanwhile under one of them is locked too.
    """
    locked: dict[int, Task] = {}
    while ids := open_subtasks(task, known=set(locked)):
        rows = (
            Task.objects.filter(pk__in=ids)
            .select_for_update(of=("self",), **NO_KEY)
            .select_related(*LOCKED_WITH)
            .order_by("pk")
        )
        locked.update((t.pk, t) for t in rows)
    return [t for _, t in sorted(locked.items()) if t.status not in FINISHED_STATUSES]
