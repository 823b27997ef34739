"""The tasks engine's statements: prepared queries, raw SQL and the PostgreSQL variants.

The services, the sweep, the rules and the event writer say what they do; the statements they
make on every move live here, compiled once, under names that say what they read or write.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime

from django.db import connection, connections, router
from django.db.models import Count, F, Func, Q, Subquery, Window

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
from organization.models import Agent, ExpertiseGroup
from organization.sql import holds_expertise
from organization.workload import workload_subquery

from .models import (
    FINISHED_STATUSES,
    SUBTASKS_LISTED,
    InboxItem,
    RefusalCount,
    Task,
    TaskEvent,
    TaskStatus,
)
from .visibility import tasks_visible

# The engine's row locks are mutexes, never a change of a row's key: FOR NO KEY UPDATE lets other
# transactions' foreign-key checks (FOR KEY SHARE) through, which FOR UPDATE would deadlock.
NO_KEY = {"no_key": True}

# What a move reads with its task: the agents it names, and the organization's team rule.
LOCKED_WITH = ("assignee", "queued_for", "queued_by", "created_by_agent", "organization__team_rule")


def on_postgresql() -> bool:
    """Whether the database is PostgreSQL: the one-statement variants run there only."""
    return connection.vendor == "postgresql"


# --- the agents' locks ------------------------------------------------------------------------


def _lock_agents_query(ids):
    # What the rules decide by is read by the lock itself, never before it.
    return (
        Agent.objects.select_for_update(**NO_KEY)
        .filter(pk__in=ids)
        .order_by("pk")
        .values_list("pk", "is_paused", "workload_capacity")
    )


# A move locks one or two agents (its target, the task's holder): those statements compiled once.
_LOCK_ONE = PreparedQuery(Agent, lambda a: _lock_agents_query([a]), a=INT)
_LOCK_TWO = PreparedQuery(Agent, lambda a, b: _lock_agents_query([a, b]), a=INT, b=INT2)


def lock_agent_rows(ids: list[int]) -> list[tuple[int, bool, int]]:
    """Lock the agents `ids` (sorted) in pk order: (pk, is_paused, workload_capacity) of each."""
    if len(ids) == 1:
        return _LOCK_ONE.rows(a=ids[0])
    if len(ids) == 2:
        return _LOCK_TWO.rows(a=ids[0], b=ids[1])
    return list(_lock_agents_query(ids)) if ids else []


# The read that locks a move's target named by handle (and the task's holder), compiled once.
_LOCK_NAMED = PreparedQuerySet(
    Agent,
    lambda organization_id, handle, with_id: (
        Agent.objects.select_for_update(of=("self",), **NO_KEY)
        .select_related("team", "hierarchy_role")
        .filter(Q(organization_id=organization_id, handle=handle) | Q(pk=with_id))
        .order_by("pk")
    ),
    organization_id=INT,
    handle=TEXT,
    with_id=INT2,
)


def lock_agents_named(*, organization_id: int, handle: str, with_id: int) -> list[Agent]:
    """Lock, in pk order, the organization's agent `handle` and the agent `with_id` (0: none)."""
    return _LOCK_NAMED.instances(organization_id=organization_id, handle=handle, with_id=with_id)


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


# --- the caller's read -------------------------------------------------------------------------

# What a read of one task shows with it: the agents its serializer names.
READ_WITH = ("assignee", "queued_for", "created_by_agent")


def _visible_read(scope: str) -> PreparedQuerySet:
    """One task as a human (`organization`) or an agent (`agent`) of its organization sees it."""

    def build(**values):
        return _task_rows(**values).select_related(*READ_WITH)[:1]

    sentinels = {"task_id": INT, "organization_id": INT2}
    if scope == "agent":
        sentinels.update(agent_id=INT3, handle=TEXT)
    return PreparedQuerySet(Task, build, **sentinels)


_VISIBLE_READS = {scope: _visible_read(scope) for scope in ("organization", "agent")}


def visible_task_rows(
    *, task_id: int, organization_id: int, agent_id: int | None, handle: str | None
) -> list[Task]:
    """The task `task_id` (a list of one, or empty) if the agent, or a human (None), may see it."""
    if agent_id is None:
        return _VISIBLE_READS["organization"].instances(
            task_id=task_id, organization_id=organization_id
        )
    return _VISIBLE_READS["agent"].instances(
        task_id=task_id, organization_id=organization_id, agent_id=agent_id, handle=handle
    )


_SUBTASKS = PreparedQuery(
    Task,
    lambda parent_id: (
        Task.objects.filter(parent_id=parent_id)
        .order_by("created_at", "pk")
        .annotate(
            total=Window(Count("pk")),
            done=Window(Count("pk", filter=Q(status__in=FINISHED_STATUSES))),
        )
        .values_list("id", "title", "status", "assignee__handle", "result", "total", "done")[
            :SUBTASKS_LISTED
        ]
    ),
    parent_id=INT,
)


def subtask_rows(parent_id: int) -> list[tuple]:
    """The task's oldest SUBTASKS_LISTED subtasks as (id, title, status, assignee's handle,
    result, total, done): the counts over all of them ride on each row as window sums."""
    return _SUBTASKS.rows(parent_id=parent_id)


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


# --- the recommendation -----------------------------------------------------------------------

# The organization's expertise groups: read by every recommendation, compiled once.
_GROUPS = PreparedQuerySet(
    ExpertiseGroup,
    lambda organization_id: ExpertiseGroup.objects.filter(organization_id=organization_id),
    organization_id=INT,
)


def expertise_groups(organization_id: int) -> list[ExpertiseGroup]:
    return _GROUPS.instances(organization_id=organization_id)


def _candidates(organization_id: int, terms: list[str], asker_id: int | None = None):
    """The agents holding one of `terms`, and the asker, with their workload and senior's team."""
    holds = holds_expertise(terms)
    # The workload as a correlated count over the (assignee, status) index: a GROUP BY over a
    # join would read every task the candidates ever held (a hundred each in a big organization).
    return (
        Agent.objects.filter(organization_id=organization_id)
        .select_related("team", "senior__team", "hierarchy_role")
        .annotate(current_workload=workload_subquery())
        .filter(holds if asker_id is None else holds | Q(pk=asker_id))
    )


# Read by every recommendation: compiled once, for an agent asking and for a human.
_CANDIDATES = PreparedQuerySet(Agent, _candidates, organization_id=INT, terms=[TEXT], asker_id=INT2)
_CANDIDATES_FOR_HUMANS = PreparedQuerySet(
    Agent,
    lambda organization_id, terms: _candidates(organization_id, terms),
    organization_id=INT,
    terms=[TEXT],
)


def candidates(organization_id: int, terms: list[str], *, asker_id: int | None = None):
    """The recommendation's candidates: who holds one of `terms`, and the asking agent."""
    if asker_id is None:
        return _CANDIDATES_FOR_HUMANS.instances(organization_id=organization_id, terms=terms)
    return _CANDIDATES.instances(organization_id=organization_id, terms=terms, asker_id=asker_id)


# --- the event writer --------------------------------------------------------------------------


# Whom a finished task tells besides its creator: read on every completion, compiled once.
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


def _arrays(events: list[TaskEvent], *attributes: str) -> list[list]:
    """One parameter array per attribute, the events' values in order (`unnest` takes them)."""
    return [[getattr(e, attribute) for e in events] for attribute in attributes]


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
                *_arrays(events, "organization_id", "task_id", "kind", "actor_kind", "actor_label"),
                *_arrays(events, "recipient_id"),
                [json.dumps(e.before) for e in events],
                [json.dumps(e.after) for e in events],
                *_arrays(events, "message", "decision", "primary_choice", "reasoning"),
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
                *_arrays(
                    events, "organization_id", "recipient_id", "task_id", "pk", "kind", "message"
                ),
            ],
        )


# --- the stale sweep's batch -------------------------------------------------------------------


def _recordset(model, attnames) -> tuple[list[str], str]:
    """(quoted columns, `json_to_recordset(%s::json) AS v(column type, …)`) of `attnames`."""
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    fields = [by_attname[a] for a in attnames]
    columns = [connection.ops.quote_name(f.column) for f in fields]
    types = ", ".join(f"{c} {f.db_type(connection)}" for c, f in zip(columns, fields, strict=True))
    return columns, f"json_to_recordset(%s::json) AS v({types})"


@functools.cache
def _update_sql(model, fields: tuple[str, ...]) -> str:
    columns, recordset = _recordset(model, ("id", *fields))
    sets = ", ".join(f"{c} = v.{c}" for c in columns[1:])
    table = connection.ops.quote_name(model._meta.db_table)
    return f"UPDATE {table} AS t SET {sets} FROM {recordset} WHERE t.id = v.id"  # noqa: S608


@functools.cache
def _insert_sql(model, returning: str = "") -> str:
    """Insert every concrete column but the pk (the tasks' events, their inbox items)."""
    attnames = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
    columns, recordset = _recordset(model, attnames)
    table = connection.ops.quote_name(model._meta.db_table)
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608
        f"SELECT {', '.join(f'v.{c}' for c in columns)} FROM {recordset}"
    )
    return f"{sql} RETURNING {returning}" if returning else sql


def update_from_json(model, document: str, *, fields: tuple[str, ...]) -> None:
    """Set `fields` of the rows in `document` (a JSON array of objects with an `id`) at once."""
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, fields), [document])


def insert_from_json(model, document: str, *, returning: str = "") -> list[tuple]:
    """Insert the rows in `document` (a JSON array of objects) at once; the `returning` rows."""
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, returning), [document])
        return cursor.fetchall() if returning else []


# --- the tasks list's search and attention filter --------------------------------------------


def ids_among(field: str, rows) -> Q:
    """`field` is one of the ids `rows` (a queryset) selects.

    PostgreSQL: `field = ANY(ARRAY(SELECT …))`, the subquery run once (an InitPlan) and the
    array then read through `field`'s index, so an `OR` of such conditions and indexed ones is a
    BitmapOr of index scans; `field IN (SELECT …)` in an `OR` is a filter on every row of the
    table. Elsewhere the portable `IN`.
    """
    ids = rows.order_by().values("pk")
    if connections[router.db_for_read(rows.model)].vendor != "postgresql":
        return Q(**{f"{field}__in": ids})
    array = Func(Subquery(ids), function="ARRAY", output_field=ID_ARRAY)
    return Q(EqualsAny(F(field), array))


def tasks_searched(terms: list[str]) -> Q:
    """The tasks list's search (the admin's `search_fields` rule): each of `terms` in the title,
    the description, or the handle of the agent holding the task or of the one it is queued for.

    Each arm reads an index: the trigram indexes on the title and the description
    (`POSTGRESQL_EXTRAS`), and the agents whose handle holds the term, read first
    (`ids_among`), through the holder's and the queue's indexes; a join to the agents in the
    `OR` made PostgreSQL read every task of the organization.
    """
    condition = Q()
    for term in terms:
        agents = Agent.objects.filter(handle__icontains=term)
        condition &= (
            Q(title__icontains=term)
            | Q(description__icontains=term)
            | ids_among("assignee_id", agents)
            | ids_among("queued_for_id", agents)
        )
    return condition


# --- the admin lists' counts ------------------------------------------------------------------


# The planner's estimate of a query's rows; the names in the delegation chain (an agent's view
# of the tasks: `infrastructure.prepared.quoted_in_json_text`, in place of a trigram index on the
# chain's text); trigram indexes in the very expressions Django's `icontains` compares on the
# title, the description and the agents' handles (`tasks_searched`).
POSTGRESQL_EXTRAS = """
CREATE OR REPLACE FUNCTION count_estimate(query text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE plan jsonb;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || query INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END $$;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DROP INDEX IF EXISTS task_chain_trgm;
CREATE INDEX IF NOT EXISTS task_chain_names ON tasks_task
    USING gin ((string_to_array(UPPER(delegation_chain::text), '"')));
CREATE INDEX IF NOT EXISTS task_title_trgm ON tasks_task
    USING gin ((UPPER(title::text)) gin_trgm_ops);
CREATE INDEX IF NOT EXISTS task_description_trgm ON tasks_task
    USING gin ((UPPER(description::text)) gin_trgm_ops);
CREATE INDEX IF NOT EXISTS agent_handle_trgm ON organization_agent
    USING gin ((UPPER(handle::text)) gin_trgm_ops);
"""


def count_refusal(*, organization_id: int, code: str) -> None:
    """One more refusal of `code` in the organization: one upsert (PostgreSQL and SQLite)."""
    table, qn = RefusalCount._meta.db_table, connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {qn(table)} (organization_id, code, count) VALUES (%s, %s, 1) "  # noqa: S608  (our names)
            f"ON CONFLICT (organization_id, code) DO UPDATE SET count = {qn(table)}.count + 1",
            [organization_id, code[:60]],
        )


def install_postgresql_extras(*, using: str = "default", **kwargs) -> None:
    """Create `POSTGRESQL_EXTRAS` (idempotent): by migration 0010, and after every migrate, so a
    database made without migrations (the tests') has them too."""
    db = connections[using]
    if db.vendor == "postgresql":
        with db.cursor() as cursor:
            cursor.execute(POSTGRESQL_EXTRAS)


def counted_or_estimated(queryset, *, exact_up_to: int) -> int:
    """How many rows `queryset` has: exact up to `exact_up_to`, past it the planner's estimate
    (`count_estimate`), in one statement that reads at most `exact_up_to + 1` rows; an exact
    COUNT of a million tasks reads them all."""
    db = connections[queryset.db]
    if db.vendor != "postgresql":
        return queryset.count()
    rows = queryset.order_by().values("pk")
    bounded, params = rows[: exact_up_to + 1].query.sql_with_params()
    whole = db.ops.compose_sql(*rows.query.sql_with_params())
    statement = (
        "SELECT CASE WHEN n > %s THEN GREATEST(count_estimate(%s), n) ELSE n END "
        f"FROM (SELECT count(*) AS n FROM ({bounded}) AS bounded) AS counted"
    )
    with db.cursor() as cursor:
        cursor.execute(statement, [exact_up_to, whole, *params])
        return cursor.fetchone()[0]
