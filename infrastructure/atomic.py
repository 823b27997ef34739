"""Atomic blocks for the services, without a savepoint where nothing would roll back to it.

A service runs in `transaction.atomic`: its own transaction, or a savepoint inside its caller's.
Some callers undo their whole transaction whenever anything inside it fails — a managed run's
tool call, which commits the call's effect with its record or nothing (collaboration/toolloop.py)
— and there the service's savepoint is two round trips to the database (SAVEPOINT, RELEASE) that
nothing ever rolls back to: a sixth of a managed run's statements. Such a caller opens its block
with `undone_whole()`; the first service inside it (`@atomic`) then opens no savepoint, and a
failure in it marks the whole transaction for rollback, as the caller does anyway. Blocks nested
deeper keep their savepoints: code that catches an error and goes on is not affected.
"""

import contextlib
import contextvars
import functools
from collections.abc import Iterator

from django.db import InterfaceError, OperationalError, connection, transaction

_UNDONE_WHOLE = contextvars.ContextVar("agent_org_undone_whole", default=False)


@contextlib.contextmanager
def undone_whole() -> Iterator[None]:
    """An atomic block that its caller undoes whole when anything in it fails."""
    with transaction.atomic():
        token = _UNDONE_WHOLE.set(True)
        try:
            yield
        finally:
            _UNDONE_WHOLE.reset(token)


def atomic(func):
    """`transaction.atomic` for a service; directly inside `undone_whole()`, without a savepoint."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        savepoint = not _UNDONE_WHOLE.get()
        token = _UNDONE_WHOLE.set(False)  # what it calls keeps its savepoints
        try:
            with transaction.atomic(savepoint=savepoint):
                return func(*args, **kwargs)
        finally:
            _UNDONE_WHOLE.reset(token)

    return wrapper


# What a dropped database connection raises (a restart, a failover, an idle timeout), as Django
# wraps psycopg's errors: a worker's run hands its lease back and is retried on it.
DATABASE_GONE = (OperationalError, InterfaceError)


def once_reconnected(work, attempts: int = 4):
    """`work()` after the database connection was lost, on a new one. The pool may hand out
    idle connections that died with it (a restart kills them all): each is discarded once it
    fails, so the work is tried again, a few times."""
    for attempt in range(attempts):
        connection.close()
        try:
            return work()
        except DATABASE_GONE:
            if attempt == attempts - 1:
                raise
    return None
