"""Cutting the database under a worker (pg_terminate_backend: a restart, a failover), either
while nothing is held (a model call waits with no connection) or in the middle of a statement."""

import contextlib
from collections.abc import Iterator

from django.db import connection, transaction

from tests.config.waiting import wait_for

OTHER_BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid()"
)


def kill(query: str = OTHER_BACKENDS) -> int:
    """Terminate the backends `query` finds; how many."""
    with connection.cursor() as cursor:
        # Inside a transaction pg_stat_activity is read once, then kept: read it afresh.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(f"SELECT count(pg_terminate_backend(pid)) FROM ({query}) AS found")
        return cursor.fetchone()[0]


@contextlib.contextmanager
def cut_when_blocked(queryset, statement_like: str) -> Iterator[None]:
    """Lock the rows of `queryset`; once a statement like `statement_like` (an ILIKE pattern)
    waits for them, terminate its backend (and any other waiting on the lock), then let go: the
    worker's statement fails as in a restart, and its next one finds the database back."""
    with transaction.atomic():
        # As an UPDATE locks them: a foreign key's check (FOR KEY SHARE) goes on.
        list(queryset.select_for_update(no_key=True))
        yield
        waiting = (
            f"{OTHER_BACKENDS} AND wait_event_type = 'Lock' AND query ILIKE '{statement_like}'"
        )
        wait_for(lambda: kill(waiting), 30, "a statement waiting for the locked rows")
        kill(f"{OTHER_BACKENDS} AND wait_event_type = 'Lock'")
