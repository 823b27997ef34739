"""The tasks engine's statements: prepared queries, raw SQL and the PostgreSQL variants.

The services, the sweep, the rules and the event writer say what they do; the statements they
make on every move live here, compiled once, under names that say what they read or write.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection, connections, router
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
    column_values,
)
from organization.models import Agent

from .models import InboxItem, Task, TaskEvent, TaskStatus
from .selectors import tasks_visible

# The engine's row locks are mutexes, never a change of a row's key: FOR NO KEY UPDATE lets other
# transactions' foreign-key checks (FOR KEY SHARE) through, which FOR UPDATE would deadlock.
NO_KEY = {"no_key": True}

# What a move reads with its task: the agents it names, and the organization's team rule.
LOCKED_WITH = ("assignee", "queued_for", "queued_by", "created_by_agent", "organization__team_rule")


def on_postgresql() -> bool:
    """Whether the database is PostgreSQL: the one-statement variants run there only."""
    return connection.vendor == "postgresql"


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
    if connections[router.db_for_read(Task)].vendor != "postgresql":
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


# --- the event writer --------------------------------------------------------------------------

# Whom a finished task tells besides its creator: read on every completion, compiled once.
_AGENT_NAMED = PreparedQuerySet(
    Agent,
    lambda organization_id, handle: Agent.objects.filter(
        organization_id=organization_id, handle=handle
    ).order_by()[:1],
    organization_id=INT,
    handle=TEXT,
)


def agent_named(*, organization_id: int, handle: str) -> list[Agent]:
    """The organization's agent `handle`, in a list of one (empty if there is none)."""
    return _AGENT_NAMED.instances(organization_id=organization_id, handle=handle)


def _insert_values(obj) -> dict[str, object] | None:
    """Column → parameter of `obj`'s INSERT as `Model.save()` makes it; None for an expression."""
    fields = [f for f in obj._meta.local_concrete_fields if not (f.primary_key or f.generated)]
    values = column_values(obj, fields, add=True, connection=connection)
    return None if values is None else {f.column: v for f, v in zip(fields, values, strict=True)}


def _columns(values: dict) -> str:
    return ", ".join(connection.ops.quote_name(c) for c in values)


def _placeholders(values: dict) -> str:
    return ", ".join(["%s"] * len(values))


def insert_event_with_item(event: TaskEvent, item: InboxItem) -> bool:
    """On PostgreSQL, insert the audit row and its inbox item in one statement (a CTE).

    False where that cannot be done: the caller then saves each.
    """
    if not on_postgresql():
        return False
    event_values, item_values = _insert_values(event), _insert_values(item)
    if event_values is None or item_values is None:
        return False
    qn = connection.ops.quote_name
    event_id = InboxItem._meta.get_field("event").column
    del item_values[event_id]
    sql = (
        f"WITH e AS (INSERT INTO {qn(TaskEvent._meta.db_table)} ({_columns(event_values)}) "
        f"VALUES ({_placeholders(event_values)}) RETURNING {qn(TaskEvent._meta.pk.column)} AS id) "
        f"INSERT INTO {qn(InboxItem._meta.db_table)} ({_columns(item_values)}, {qn(event_id)}) "
        f"SELECT {_placeholders(item_values)}, e.id FROM e "
        f"RETURNING {qn(InboxItem._meta.pk.column)}, {qn(event_id)}"
    )  # every value is a parameter; the names are our models'
    with connection.cursor() as cursor:
        cursor.execute(sql, [*event_values.values(), *item_values.values()])
        item.pk, event.pk = cursor.fetchone()
    for obj in (event, item):
        obj._state.adding, obj._state.db = False, connection.alias
    item.event = event
    return True


# What `insert_events` writes besides the columns every event has: an escalation by the system.
# Any other field set on a batched event would be lost, so `insert_events` refuses it.
_UNBATCHED = (
    "actor_agent_id",
    "actor_user_id",
    "primary_reason",
    "fallback",
    "notes",
    "wait_time_seconds",
    "coordination_note",
    "cross_team",
)


def insert_events(events: list[TaskEvent], now: datetime) -> None:
    """Insert the system's events (as the sweep makes them) in one statement; set their pks."""
    if any(getattr(e, f) for e in events for f in _UNBATCHED):
        raise ValueError(f"Batched events carry none of {', '.join(_UNBATCHED)}.")
    for e in events:
        e.created_at = now
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TaskEvent._meta.db_table} (
                organization_id, task_id, kind, actor_kind, actor_agent_id, actor_user_id,
                actor_label, recipient_id, before, after, message, decision, primary_choice,
                primary_reason, fallback, reasoning, wait_time_seconds, notes, created_at)
            SELECT v.org, v.task, v.kind, v.actor_kind, NULL, NULL, v.actor_label, v.recipient,
                   v.before::jsonb, v.after::jsonb, v.message, v.decision, v.choice, '', '',
                   v.reasoning, NULL, '', %s
            FROM unnest(
                %s::bigint[], %s::bigint[], %s::varchar[], %s::varchar[], %s::varchar[],
                %s::bigint[], %s::text[], %s::text[], %s::text[], %s::varchar[], %s::varchar[],
                %s::text[]
            ) AS v(org, task, kind, actor_kind, actor_label, recipient, before, after, message,
                   decision, choice, reasoning)
            RETURNING id, task_id
            """,  # noqa: S608  (the table name is ours, every value is a parameter)
            [
                now,
                [e.organization_id for e in events],
                [e.task_id for e in events],
                [e.kind for e in events],
                [e.actor_kind for e in events],
                [e.actor_label for e in events],
                [e.recipient_id for e in events],
                [json.dumps(e.before) for e in events],
                [json.dumps(e.after) for e in events],
                [e.message for e in events],
                [e.decision for e in events],
                [e.primary_choice for e in events],
                [e.reasoning for e in events],
            ],
        )
        ids = {task_id: pk for pk, task_id in cursor.fetchall()}
    for e in events:
        e.pk = ids[e.task_id]


def insert_inbox_items(events: list[TaskEvent], now: datetime) -> None:
    """Insert the inbox items of `events` (one each, for its recipient) in one statement."""
    if not events:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {InboxItem._meta.db_table}
                (organization_id, agent_id, task_id, event_id, kind, message, read_at, created_at)
            SELECT v.org, v.agent, v.task, v.event, v.kind, v.message, NULL, %s
            FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
                        %s::varchar[], %s::text[]) AS v(org, agent, task, event, kind, message)
            """,  # noqa: S608  (the table name is ours, every value is a parameter)
            [
                now,
                [e.organization_id for e in events],
                [e.recipient_id for e in events],
                [e.task_id for e in events],
                [e.pk for e in events],
                [e.kind for e in events],
                [e.message for e in events],
            ],
        )
