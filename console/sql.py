"""The dashboard's load history in one statement: each audit row of a task valid until its next
(`LEAD`), the held test outside the window (the ORM would put it inside, before `LEAD`), over
the tasks that moved since the window's start or are held now, never the whole trail."""

from datetime import datetime

from django.db import connection

from tasks.models import Task, TaskEvent

# The status and the holder an audit row leaves its task with, per database.
_AFTER = {
    "postgresql": ("after->>'status'", "after->>'assignee'"),
    "sqlite": ("json_extract(after, '$.status')", "json_extract(after, '$.assignee')"),
}


def held_intervals(*, organization_id: int, since: datetime, statuses) -> list[tuple]:
    """(from, until) of every stretch a task of the organization was held by an agent that
    lasts past `since` (`until` None: held now)."""
    status, assignee = _AFTER.get(connection.vendor, _AFTER["postgresql"])
    statuses = list(statuses)
    marks = ", ".join(["%s"] * len(statuses))
    table = connection.ops.quote_name(TaskEvent._meta.db_table)
    tasks = connection.ops.quote_name(Task._meta.db_table)
    # A stretch lasting past `since` ends after it (the task moved since) or not at all (the
    # task is held now): the other tasks' trails cannot hold one.
    statement = f"""
        SELECT created_at, until FROM (
            SELECT created_at, {status} AS status, {assignee} AS assignee,
                   LEAD(created_at) OVER (PARTITION BY task_id ORDER BY created_at, id) AS until
            FROM {table} WHERE organization_id = %s AND task_id IN (
                SELECT task_id FROM {table} WHERE organization_id = %s AND created_at > %s
                UNION SELECT id FROM {tasks} WHERE organization_id = %s AND status IN ({marks})
            )
        ) AS moves
        WHERE status IN ({marks}) AND assignee IS NOT NULL AND (until IS NULL OR until > %s)
    """
    with connection.cursor() as cursor:
        cursor.execute(
            statement,
            [organization_id, organization_id, since, organization_id, *statuses, *statuses, since],
        )
        rows = cursor.fetchall()
    if connection.vendor == "sqlite":  # its driver hands text back for these columns
        from django.utils.dateparse import parse_datetime

        return [(parse_datetime(str(a)), parse_datetime(str(b)) if b else None) for a, b in rows]
    return rows
