"""Django's PostgreSQL backend, with a pool that never hands out a connection the server closed:
each is checked as it leaves the pool by polling its socket (no round trip), since after a
restart psycopg's pool gives out dead connections unchecked. Counted by django-prometheus
(connections, statements, errors, durations: docs/observability.md).
"""

import select

from django.db.backends.base.base import NO_DB_ALIAS
from django_prometheus.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


def closed_by_server(conn) -> bool:
    if conn.closed:
        return True
    poller = select.poll()  # not select.select: it cannot watch a descriptor above 1023
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class LivePool(ConnectionPool):
    def getconn(self, timeout: float | None = None):
        # Dead connections are discarded (the pool opens one in each's place) and the next one
        # taken at once; psycopg's own `check=` would sleep a second after each.
        for _ in range(self.max_size):
            conn = super().getconn(timeout)
            if not closed_by_server(conn):
                return conn
            conn.close()
            self.putconn(conn)
        return super().getconn(timeout)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        # Django's own property (django-prometheus' wrapper leaves it as is), building a LivePool
        # (settings.py keeps CONN_MAX_AGE off).
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not pool_options:
            return None
        if self.alias not in self._connection_pools:
            pool = LivePool(
                kwargs={**self.get_connection_params(), "autocommit": True},
                open=False,
                configure=self._configure_connection,
                **({} if pool_options is True else pool_options),
            )
            # setdefault: threads racing here keep the first pool (none is open yet).
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]
