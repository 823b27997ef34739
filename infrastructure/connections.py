"""The thread's database connection given back while it waits on something slow (a model call),
so that a thousand waiting agents hold none of the few connections a process has."""

from django.db import connection


def release_connection() -> None:
    """Give this thread's PostgreSQL connection back (to the pool, or closed) before a long wait;
    the next query takes one again. Inside a transaction nothing is released: its locks and
    writes need that connection."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    connection.close()
