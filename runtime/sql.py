"""The wake-up's statements on PostgreSQL, compiled once per connection alias.

A wake-up is the runtime's hottest path (every move that reaches a managed agent): services.py
says what it does, these say how in as few statements as it takes. Table and column names are
ours; every value is a parameter.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from costs.models import Budget
from organization.models import Agent

from .models import Run, RunTrigger

_reads: dict[tuple[str, tuple[str, ...], bool], str] = {}


def wake_read(connection: BaseDatabaseWrapper, fields: tuple[str, ...], *, caused: bool) -> str:
    """Lock the agent's row and read `fields`, whether someone reports to it and whether its
    organization has any budget. `caused` (another run's act woke it) adds that run's depth and
    how many runs the agent had since a moment, up to a limit: the bounds of wake chains, read
    with the lock (by the `run_org_agent` index). Parameters: [woken_by, since, limit,] agent."""
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
    """Insert a trigger with the agent's active run, if it has one: joining it when it is queued
    and not started (its row locked), else waiting for its end (`run` null); nothing when it has
    none; a run it joins becomes as shallow as the chain it brings. Returns the run joined (null
    when waiting). Parameters: agent, queued status, the joined run's depth twice, agent, active
    statuses, then TRIGGER_FIELDS but `run` and `held` (not held)."""
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
