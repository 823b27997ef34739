"""The dashboard's load history in one statement: the tasks held now, read from the tasks, and,
for the past instants not yet counted, each audit row of a task valid until its next (`LEAD`),
over the tasks that moved since the earliest of them or are held now, never the whole trail."""

from datetime import datetime

from django.db import connection

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
    if connection.vendor == "sqlite":  # its driver hands text back for these columns
        from django.utils.dateparse import parse_datetime

        rows = [(parse_datetime(str(a)), parse_datetime(str(b)) if b else None) for a, b in rows]
    return held, rows
