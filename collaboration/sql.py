"""The collaboration app's SQL: on PostgreSQL, a contribution's status change and its events in
one statement (an UPDATE … RETURNING feeding the events' INSERT), as an agent's claim and
settle are on its critical path.
"""

from django.db import connection

from .models import Contribution


def may_run_in_one_statement() -> bool:
    return connection.vendor == "postgresql"


def update_contribution_recording(pk, from_statuses, fields: dict, recorded: list) -> int:
    """Set `fields` on contribution `pk` if its status is one of `from_statuses`, and insert the
    `recorded` events only if it was; returns the rows updated (0 or 1)."""
    statement, params = _update_recording_sql(fields, len(from_statuses), recorded)
    with connection.cursor() as cursor:
        cursor.execute(statement, [*params[0], pk, *from_statuses, *params[1]])
        return cursor.rowcount


def _update_recording_sql(
    fields: dict, statuses: int, recorded: list
) -> tuple[str, tuple[list, list]]:
    """`WITH changed AS (UPDATE … RETURNING 1) INSERT INTO <events> … SELECT … FROM changed`,
    and its parameters (the UPDATE's, then the events'); Django's own conversions of values."""
    quote = connection.ops.quote_name
    meta = Contribution._meta
    sets, set_params = [], []
    for name, value in fields.items():
        field = meta.get_field(name)
        sets.append(f"{quote(field.column)} = %s")
        set_params.append(field.get_db_prep_save(value, connection))
    update = (
        f"UPDATE {quote(meta.db_table)} SET {', '.join(sets)} "  # noqa: S608
        f"WHERE {quote(meta.pk.column)} = %s "
        f"AND {quote(meta.get_field('status').column)} IN ({', '.join(['%s'] * statuses)}) "
        "RETURNING 1"
    )
    if not recorded:
        return f"{update}", (set_params, [])
    event_meta = recorded[0]._meta
    fields_ = [f for f in event_meta.concrete_fields if not f.primary_key]
    rows, event_params = [], []
    for event in recorded:
        rows.append(", ".join(f"%s::{f.db_type(connection)}" for f in fields_))
        event_params += [
            f.get_db_prep_save(f.pre_save(event, add=True), connection) for f in fields_
        ]
    selects = " UNION ALL ".join(f"SELECT {row} FROM changed" for row in rows)
    statement = (
        f"WITH changed AS ({update}) "  # noqa: S608
        f"INSERT INTO {quote(event_meta.db_table)} ({', '.join(quote(f.column) for f in fields_)}) "
        f"{selects}"
    )
    return statement, (set_params, event_params)
