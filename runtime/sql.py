"""The runtime's statements: prepared queries, the wake-up's and the record's SQL, vendor branches.

The services say what they do, these say how; table names are ours, every value a parameter."""

from __future__ import annotations

import json
from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Exists, OuterRef, TextField
from django.db.models.functions import Cast

from costs.models import Budget
from infrastructure.prepared import (
    INT,
    INT2,
    PreparedInstances,
    PreparedQuery,
    PreparedQuerySet,
    among,
)
from organization.models import Agent
from tasks.models import Task, TaskComment
from tasks.sql import NO_KEY

from .models import ACTIVE_STATUSES, SETTLEABLE, Run, RunStatus, RunTrigger, RunTurn


def is_postgresql() -> bool:
    """The database runs the one-statement paths below (SQLite, under `make run`, the ORM's)."""
    return connection.vendor == "postgresql"


# --- the locks of a wake-up and of a run's end --------------------------------------------------

_LOCK_AGENT = PreparedInstances(
    Agent,
    ("id", "organization_id", "team_id", "handle", "runtime", "is_paused"),
    lambda agent_id: Agent.objects.select_for_update(**NO_KEY).filter(pk=agent_id).order_by(),
    agent_id=INT,
)
_LOCK_ACTIVE_RUN = PreparedInstances(
    Run,
    ("id", "agent_id", "status", "attempts"),
    lambda agent_id: (
        Run.objects.select_for_update(of=("self",), **NO_KEY)
        .filter(agent_id=agent_id, status__in=ACTIVE_STATUSES)
        .order_by("pk")[:1]
    ),
    agent_id=INT,
)
_WAITING = PreparedInstances(
    RunTrigger,
    ("id", "task_id", "trigger", "depth"),
    lambda agent_id: RunTrigger.objects.filter(
        agent_id=agent_id, run__isnull=True, held=""
    ).order_by("pk"),
    agent_id=INT,
)


def locked_agent(agent_id: int) -> Agent | None:
    """The agent, its row locked, with the fields the runtime reads."""
    return next(iter(_LOCK_AGENT.instances(agent_id=agent_id)), None)


def locked_active_run(agent_id: int) -> Run | None:
    """The agent's queued or running run, its row locked."""
    return next(iter(_LOCK_ACTIVE_RUN.instances(agent_id=agent_id)), None)


def waiting_triggers(agent_id: int) -> list[RunTrigger]:
    """The agent's triggers that wait for a run, not held, oldest first."""
    return _WAITING.instances(agent_id=agent_id)


def lock_for_wake(
    agent_id: int, woken_by: int | None, since: datetime, limit: int
) -> tuple[Agent | None, bool, int | None, int | None]:
    """(the agent, its row locked, with `has_reports`; whether its organization has any budget;
    when `woken_by` is a run: its depth and the agent's runs since `since`, up to `limit`).
    One statement on PostgreSQL; elsewhere the lock, then the bounds."""
    if not is_postgresql():
        agent = locked_agent(agent_id)
        if agent is None or woken_by is None:
            return agent, True, None, None
        depth = Run.objects.filter(pk=woken_by).values_list("depth", flat=True).first()
        runs = Run.objects.filter(agent_id=agent_id, created_at__gte=since)[:limit].count()
        return agent, True, depth, runs
    caused = woken_by is not None
    params = [woken_by, since, limit] if caused else []
    with connection.cursor() as cursor:
        cursor.execute(
            wake_read(connection, _LOCK_AGENT.fields, caused=caused), [*params, agent_id]
        )
        row = cursor.fetchone()
    if row is None:
        return None, False, None, None
    width = len(_LOCK_AGENT.fields)
    agent = Agent.from_db(connection.alias, _LOCK_AGENT.fields, row[:width])
    agent.has_reports = row[width]
    if not caused:
        return agent, row[width + 1], None, None
    return agent, row[width + 1], row[width + 2], row[width + 3]


def join_active_run(
    agent: Agent,
    *,
    trigger: str,
    task_id: int | None,
    woken_by: int | None,
    depth: int,
    now: datetime,
) -> tuple[Run | None] | None:
    """PostgreSQL: record the trigger with the agent's active run in one statement. `(run or None,)`
    when it had one (joined when queued, None while running); None, writing nothing, when not."""
    joined_depth = depth + 1
    with connection.cursor() as cursor:
        cursor.execute(
            trigger_with_active_run(connection),
            [
                agent.pk,
                RunStatus.QUEUED,
                joined_depth,
                joined_depth,
                agent.pk,
                list(ACTIVE_STATUSES),
                agent.organization_id,
                agent.pk,
                task_id,
                trigger,
                woken_by,
                depth,
                now,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    if row[0] is None:
        return (None,)
    fields = ("id", "agent_id", "status")
    return (Run.from_db(connection.alias, fields, (row[0], agent.pk, RunStatus.QUEUED)),)


# --- a run's record -----------------------------------------------------------------------------


def record_turns(
    *,
    run_id: int,
    agent_id: int,
    token: str,
    turns: list[dict],
    prompt_tokens: int,
    completion_tokens: int,
    now: datetime,
) -> tuple[bool, str] | None:
    """PostgreSQL: renew the lease with the tokens so far and upsert the turns by index, one
    statement; (the agent's is_paused, runtime), or None when the lease was lost. Outside a
    transaction it commits without waiting for the disk (its own `synchronous_commit`)."""
    qn = connection.ops.quote_name
    run_table, turn_table = qn(Run._meta.db_table), qn(RunTurn._meta.db_table)
    # Inside a transaction (a call's outcome) the transaction keeps its own commit.
    own = not connection.in_atomic_block
    no_wait = "no_wait AS (SELECT set_config('synchronous_commit', 'off', true))," if own else ""
    from_no_wait = ", no_wait" if own else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH {no_wait}
            lease AS (
                UPDATE {run_table} SET prompt_tokens = %s, completion_tokens = %s,
                    heartbeat_at = %s
                WHERE id = %s AND lease_token = %s RETURNING id),
            agent AS (SELECT is_paused, runtime FROM {qn(Agent._meta.db_table)}
                WHERE id = %s)
            INSERT INTO {turn_table} (run_id, index, data)
            SELECT lease.id, (turn ->> 'index')::integer, turn
            FROM lease{from_no_wait}, jsonb_array_elements(%s::jsonb) AS turn
            ON CONFLICT (run_id, index) DO UPDATE SET data = EXCLUDED.data
            RETURNING (SELECT is_paused FROM agent), (SELECT runtime FROM agent)
            """,  # noqa: S608  (the table names are ours, every value is a parameter)
            # The turns as one JSON array: psycopg escapes each element of a jsonb[] parameter
            # with a regular expression, a cost per turn.
            [
                prompt_tokens,
                completion_tokens,
                now,
                run_id,
                token,
                agent_id,
                json.dumps(turns, cls=DjangoJSONEncoder),
            ],
        )
        rows = cursor.fetchall()
    return rows[0] if rows else None


# --- a delivery's claim, and a run's end --------------------------------------------------------

# Every delivery of a run reads it with this lock, and whether its organization has any budget:
# most have none, and then none is searched.
_LOCK_RUN = PreparedQuerySet(
    Run,
    lambda run_id: (
        Run.objects.select_for_update(of=("self",), **NO_KEY)
        .select_related("agent", "agent__organization", "organization")
        .annotate(
            any_budget=Exists(Budget.objects.filter(organization_id=OuterRef("organization_id")))
        )
        .filter(pk=run_id)
        .order_by()[:1]
    ),
    run_id=INT,
)


def locked_run(run_id: int) -> Run | None:
    """The run, its row locked, with its agent, organization and `any_budget`."""
    return next(iter(_LOCK_RUN.instances(run_id=run_id)), None)


_HELD = PreparedQuerySet(
    Task,
    lambda task_ids, agent_id: Task.objects.filter(
        among("pk", task_ids), assignee_id=agent_id, status__in=SETTLEABLE
    ).order_by("pk"),
    task_ids=[INT],
    agent_id=INT2,
)


def settleable_tasks(task_ids: list[int], agent_id: int) -> list[Task]:
    """The tasks of `task_ids` the agent holds, assigned or in progress, by id (read at every
    run's end)."""
    return _HELD.instances(task_ids=task_ids, agent_id=agent_id)


# --- a run's input (context.py) -----------------------------------------------------------------

_TRIGGERS = PreparedQuery(
    RunTrigger,
    lambda run_id: (
        RunTrigger.objects.filter(run_id=run_id).order_by("pk").values_list("task_id", "trigger")
    ),
    run_id=INT,
)
# The fields of a task the input gives, with its parent's.
TASK_FIELDS = (
    "pk", "title", "description", "required_expertise", "urgency", "deadline", "status",
    "assignee_id", "assignee__handle", "queued_for__handle", "created_by_agent__handle", "result",
    "parent_id", "parent__title", "parent__description", "parent__status",
    "parent__assignee__handle", "parent__assignee_id", "parent__created_by_agent_id",
    "parent__queued_for_id",
)  # fmt: skip
# JSON columns read as their text and decoded by the caller: the same on every backend.
TASK_JSON = ("delegation_chain", "result_data", "parent__delegation_chain")
_TASKS = PreparedQuery(
    Task,
    lambda task_ids, organization_id: (
        Task.objects.filter(among("pk", task_ids), organization_id=organization_id)
        .order_by()
        .values_list(*TASK_FIELDS, *(Cast(f, TextField()) for f in TASK_JSON))
    ),
    task_ids=[INT],
    organization_id=INT2,
)
_SUBTASKS = PreparedQuery(
    Task,
    lambda task_ids: (
        Task.objects.filter(among("parent_id", task_ids))
        .order_by("created_at", "pk")
        .values_list(
            "parent_id", "pk", "title", "required_expertise", "status", "assignee__handle", "result"
        )
    ),
    task_ids=[INT],
)
_COMMENTS = PreparedQuery(
    TaskComment,
    lambda task_ids: (
        TaskComment.objects.filter(among("task_id", task_ids))
        .order_by("-created_at", "-pk")
        .values_list("task_id", "author_label", "body", "created_at")
    ),
    task_ids=[INT],
)
_REPORTS = PreparedQuery(
    Agent,
    lambda senior_id: (
        Agent.objects.filter(senior_id=senior_id).order_by("handle").values_list("handle")
    ),
    senior_id=INT,
)


def run_triggers(run_id: int) -> list[tuple[int | None, str]]:
    """(task id, trigger) of each trigger of the run, oldest first."""
    return _TRIGGERS.rows(run_id=run_id)


def task_rows(task_ids: list[int], organization_id: int) -> list[tuple]:
    """TASK_FIELDS then TASK_JSON (as text) of each task of `task_ids` in the organization."""
    return _TASKS.rows(task_ids=task_ids, organization_id=organization_id)


def subtask_rows(task_ids: list[int]) -> list[tuple]:
    """(parent, id, title, expertise, status, holder, result) of their subtasks, oldest first."""
    return _SUBTASKS.rows(task_ids=task_ids)


def comment_rows(task_ids: list[int]) -> list[tuple]:
    """(task, author, body, created_at) of their comments, latest first."""
    return _COMMENTS.rows(task_ids=task_ids)


def report_handles(agent_id: int) -> list[str]:
    """The handles of the agent's reports, in order."""
    return [handle for (handle,) in _REPORTS.rows(senior_id=agent_id)]


# --- the statement builders, compiled once per connection alias ---------------------------------

_reads: dict[tuple[str, tuple[str, ...], bool], str] = {}


def wake_read(connection: BaseDatabaseWrapper, fields: tuple[str, ...], *, caused: bool) -> str:
    """Lock the agent's row; read `fields`, whether someone reports to it, whether its organization
    has a budget and, `caused`, the waking run's depth and the agent's recent runs (up to a limit).
    Parameters: [woken_by, since, limit,] agent."""
    key = (connection.alias, fields, caused)
    sql = _reads.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        agent, budget, run = (qn(m._meta.db_table) for m in (Agent, Budget, Run))
        columns = ", ".join(qn(Agent._meta.get_field(f).column) for f in fields)
        bounds = (
            f", (SELECT depth FROM {run} WHERE id = %s), "
            f"(SELECT count(*) FROM (SELECT 1 FROM {run} h WHERE h.organization_id = "
            f"{agent}.organization_id AND h.agent_id = {agent}.id AND h.created_at >= %s "
            f"LIMIT %s) n)"
            if caused
            else ""
        )
        sql = _reads[key] = (
            f"SELECT {columns}, EXISTS (SELECT 1 FROM {agent} r "  # noqa: S608  (our names)
            f"WHERE r.senior_id = {agent}.id), EXISTS (SELECT 1 FROM {budget} b "
            f"WHERE b.organization_id = {agent}.organization_id){bounds} "
            f"FROM {agent} WHERE id = %s FOR NO KEY UPDATE OF {agent}"
        )
    return sql


# The columns `trigger_with_active_run` writes, in its statement's order.
TRIGGER_FIELDS = (
    "organization",
    "agent",
    "run",
    "task",
    "trigger",
    "woken_by",
    "depth",
    "held",
    "created_at",
)
_inserts: dict[str, str] = {}


def trigger_with_active_run(connection: BaseDatabaseWrapper) -> str:
    """Insert a trigger with the agent's active run: joining a queued, unstarted one (locked,
    made as shallow as the chain), else waiting (`run` null); nothing without one. Parameters:
    agent, queued, joined depth twice, agent, active statuses, TRIGGER_FIELDS but run and held."""
    sql = _inserts.get(connection.alias)
    if sql is None:
        qn = connection.ops.quote_name
        column = {f.name: qn(f.column) for f in RunTrigger._meta.concrete_fields}
        columns = ", ".join(column[name] for name in TRIGGER_FIELDS)
        run_table = qn(Run._meta.db_table)
        sql = _inserts[connection.alias] = (
            f"WITH q AS (SELECT id FROM {run_table} "  # noqa: S608  (ours)
            f"WHERE agent_id = %s AND status = %s AND attempts = 0 "
            f"ORDER BY id LIMIT 1 FOR NO KEY UPDATE), "
            f"u AS (UPDATE {run_table} SET depth = %s WHERE id = (SELECT id FROM q) "
            f"AND depth > %s), "
            f"r AS (SELECT id FROM {run_table} "
            f"WHERE agent_id = %s AND status = ANY(%s) ORDER BY id LIMIT 1) "
            f"INSERT INTO {qn(RunTrigger._meta.db_table)} ({columns}) "
            f"SELECT %s, %s, (SELECT id FROM q), %s, %s, %s, %s, '', %s FROM r "
            f"RETURNING {column['run']}"
        )
    return sql
