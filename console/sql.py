"""The dashboard's load history in one statement: the tasks held now, read from the tasks, and,
for the past instants not yet counted, each audit row of a task valid until its next (`LEAD`),
over the tasks that moved since the earliest of them or are held now, never the whole trail."""

from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from organization.models import Agent
from tasks.models import Task, TaskEvent

# The status and the holder an audit row leaves its task with, per database.
_AFTER = {
    "postgresql": ("after->>'status'", "after->>'assignee'"),
    "sqlite": ("json_extract(after, '$.status')", "json_extract(after, '$.assignee')"),
}


def held_now_and_intervals(
    *, organization_id: int, since: datetime | None, statuses
) -> tuple[int, list[tuple]]:
    """How many tasks of the organization an agent holds now, and (from, until) of every stretch
    one was held that lasts past `since` (`until` None: held now; none when `since` is None)."""
    status, assignee = _AFTER.get(connection.vendor, _AFTER["postgresql"])
    statuses = list(statuses)
    marks = ", ".join(["%s"] * len(statuses))
    table = connection.ops.quote_name(TaskEvent._meta.db_table)
    tasks = connection.ops.quote_name(Task._meta.db_table)
    holder = connection.ops.quote_name(Task._meta.get_field("assignee").column)
    wanted = since is not None
    # A stretch lasting past `since` ends after it (the task moved since) or not at all (the
    # task is held now): the other tasks' trails cannot hold one. With no `since`, the constant
    # false `%s` spares PostgreSQL the trail (a one-time filter).
    statement = f"""
        SELECT created_at, until, NULL AS held FROM (
            SELECT created_at, {status} AS status, {assignee} AS assignee,
                   LEAD(created_at) OVER (PARTITION BY task_id ORDER BY created_at, id) AS until
            FROM {table} WHERE %s AND organization_id = %s AND task_id IN (
                SELECT task_id FROM {table} WHERE organization_id = %s AND created_at > %s
                UNION SELECT id FROM {tasks} WHERE organization_id = %s AND status IN ({marks})
            )
        ) AS moves
        WHERE status IN ({marks}) AND assignee IS NOT NULL AND (until IS NULL OR until > %s)
        UNION ALL
        SELECT NULL, NULL, COUNT(*) FROM {tasks}
        WHERE organization_id = %s AND status IN ({marks}) AND {holder} IS NOT NULL
    """
    with connection.cursor() as cursor:
        cursor.execute(
            statement,
            [
                wanted,
                organization_id,
                organization_id,
                since,
                organization_id,
                *statuses,
                *statuses,
                since,
                organization_id,
                *statuses,
            ],
        )
        rows = cursor.fetchall()
    held = next(n for _, _, n in rows if n is not None)
    rows = [(a, b) for a, b, n in rows if n is None]
    if connection.vendor == "sqlite":  # its driver hands back naive UTC text for these columns
        rows = [(_sqlite_time(a), _sqlite_time(b) if b else None) for a, b in rows]
    return held, rows


def _sqlite_time(value) -> datetime:
    moment = parse_datetime(str(value))
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def at_capacity_count(*, organization_id: int, statuses) -> int:
    """How many of the organization's agents hold as many tasks as they may (workload, the
    tasks of `statuses` each holds, ≥ capacity: `organization.workload.at_capacity`).

    The held tasks are counted once, grouped by holder over the `task_org_held` index, and joined
    to the agents: a workload counted per agent is a lookup for each of ten thousand agents. A
    task's holder is always of the task's organization, so its tasks are all counted."""
    statuses = list(statuses)
    marks = ", ".join(["%s"] * len(statuses))
    agents = connection.ops.quote_name(Agent._meta.db_table)
    tasks = connection.ops.quote_name(Task._meta.db_table)
    holder = connection.ops.quote_name(Task._meta.get_field("assignee").column)
    statement = f"""
        SELECT COUNT(*) FROM {agents} AS a LEFT JOIN (
            SELECT {holder} AS agent_id, COUNT(*) AS n FROM {tasks}
            WHERE organization_id = %s AND status IN ({marks}) AND {holder} IS NOT NULL
            GROUP BY {holder}
        ) AS held ON held.agent_id = a.id
        WHERE a.organization_id = %s AND COALESCE(held.n, 0) >= a.workload_capacity
    """
    with connection.cursor() as cursor:
        cursor.execute(statement, [organization_id, *statuses, organization_id])
        return cursor.fetchone()[0]
