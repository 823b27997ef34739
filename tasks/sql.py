"""The tasks engine's statements: prepared queries, raw SQL and the PostgreSQL variants.

The services, the sweep, the rules and the event writer say what they do; the statements they
make on every move live here, compiled once, under names that say what they read or write.
"""

from __future__ import annotations

from django.db import connections, router
from django.db.models import Count, F, Func, Q, Subquery

from infrastructure.prepared import (
    ID_ARRAY,
    INT,
    INT2,
    INT3,
    TEXT,
    EqualsAny,
    PreparedQuery,
    PreparedQuerySet,
)
from organization.models import Agent

from .models import Task, TaskStatus
from .selectors import tasks_visible

# The engine's row locks are mutexes, never a change of a row's key: FOR NO KEY UPDATE lets other
# transactions' foreign-key checks (FOR KEY SHARE) through, which FOR UPDATE would deadlock.
NO_KEY = {"no_key": True}

# What a move reads with its task: the agents it names, and the organization's team rule.
LOCKED_WITH = ("assignee", "queued_for", "queued_by", "created_by_agent", "organization__team_rule")


def on_postgresql(model=Task) -> bool:
    """Whether `model`'s database is PostgreSQL (the one-statement variants run there only)."""
    return connections[router.db_for_read(model)].vendor == "postgresql"


# --- the move's lock ---------------------------------------------------------------------------


def _task_rows(
    task_id: int,
    organization_id: int | None = None,
    agent_id: int | None = None,
    handle: str | None = None,
):
    """The task `task_id`; with an organization, as its agent `agent_id` (or a human) sees it."""
    if organization_id is None:
        return Task.objects.filter(pk=task_id).order_by()
    agent = Agent(pk=agent_id, handle=handle) if agent_id is not None else None
    return tasks_visible(organization_id, agent).filter(pk=task_id).order_by()


def _task_and_parent(rows) -> Q:
    """The condition "the task of `rows` (one at most) or its parent".

    PostgreSQL: `id = ANY((SELECT ARRAY[id, parent_id] …))`, the subquery run once before the pk
    index is read; the portable `IN (… UNION ALL …)` is slower to plan.
    """
    if not on_postgresql():
        return Q(pk__in=rows.values("pk").union(rows.values("parent_id"), all=True))
    pair = Func(
        F("pk"),
        F("parent_id"),
        function="ARRAY",
        template="%(function)s[%(expressions)s]",
        output_field=ID_ARRAY,
    )
    return Q(EqualsAny(F("pk"), Subquery(rows.values(pair=pair))))


def _lock_read(scope: str, with_parent: bool) -> PreparedQuerySet:
    """The read that locks a move's task (and its parent), compiled once.

    `scope`: any task, the organization's, or those an agent may see.
    """

    def build(**values):
        rows = _task_rows(**values)
        if with_parent:
            rows = Task.objects.filter(_task_and_parent(rows)).order_by("pk")
        return rows.select_for_update(of=("self",), **NO_KEY).select_related(*LOCKED_WITH)[:2]

    sentinels = {"task_id": INT}
    if scope != "any":
        sentinels["organization_id"] = INT2
    if scope == "agent":
        sentinels.update(agent_id=INT3, handle=TEXT)
    return PreparedQuerySet(Task, build, **sentinels)


_LOCK_READS = {
    (scope, with_parent): _lock_read(scope, with_parent)
    for scope in ("any", "organization", "agent")
    for with_parent in (False, True)
}


def lock_task_rows(scope: str, *, with_parent: bool, **values) -> list[Task]:
    """Lock and read a move's task (and, `with_parent`, its parent) as `scope` sees it."""
    return _LOCK_READS[scope, with_parent].instances(**values)


# --- the queue ---------------------------------------------------------------------------------

# Most moves that free room find the queue empty: this count spares them the full, locked read.
_QUEUED_COUNT = PreparedQuery(
    Task,
    lambda agent_id: (
        Task.objects.filter(queued_for_id=agent_id, status=TaskStatus.QUEUED)
        .order_by()
        .values("queued_for_id")
        .annotate(n=Count("pk"))
        .values_list("n")
    ),
    agent_id=INT,
)


def queued_count(agent_id: int) -> int:
    """How many tasks wait in the agent's queue."""
    return next(iter(_QUEUED_COUNT.rows(agent_id=agent_id)), (0,))[0]
