"""`GET /healthz`: is the database reachable, is the broker reachable."""

import os
import threading

from django.db import connection
from django.http import JsonResponse
from kombu import Connection

# Seconds the check waits for a pooled connection: the pool's own wait (DATABASE_POOL_TIMEOUT,
# 10 s by default, for requests) would hold a load balancer's probe that long while PostgreSQL
# is down.
DATABASE_TIMEOUT = 2


def _check_database() -> str:
    try:
        pool = getattr(connection, "pool", None)  # only PostgreSQL's backend has one
        if pool is not None and connection.connection is None:
            pool.open()  # as Django does before its first query; opening twice is a no-op
            with pool.connection(timeout=DATABASE_TIMEOUT) as conn:
                conn.execute("SELECT 1")
        else:
            # What a request does first: a connection past CONN_MAX_AGE, or one the server
            # closed (CONN_HEALTH_CHECKS), is replaced rather than reported as an error.
            connection.close_if_unusable_or_obsolete()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any failure means "not healthy", reported, not raised
        connection.close()  # the next check connects afresh
        return f"error: {exc.__class__.__name__}"


class _Round:
    """One run of the database check, which every probe arriving meanwhile waits for."""

    def __init__(self):
        self.done = threading.Event()
        self.result = "error: Timeout"


class _DatabaseChecker:
    """Runs the check on a thread of its own, so a probe waits DATABASE_TIMEOUT for it at most;
    one round at a time (a hung server holds one thread, not one per probe), on one daemon thread
    for the process' life so its connection is reused."""

    def __init__(self):
        self._lock = threading.Lock()
        self._asked = threading.Condition(self._lock)
        self._round: _Round | None = None  # asked for or running
        self._thread: threading.Thread | None = None

    def check(self, timeout: float) -> str:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # first call, or a fork
                self._thread = threading.Thread(
                    target=self._serve, name="healthz-database", daemon=True
                )
                self._thread.start()
            if self._round is None:
                self._round = _Round()
                self._asked.notify()
            round_ = self._round
        round_.done.wait(timeout)
        return round_.result

    def _serve(self) -> None:
        while True:
            with self._lock:
                while self._round is None:
                    self._asked.wait()
                round_ = self._round
            result = _check_database()
            with self._lock:
                round_.result, self._round = result, None
            round_.done.set()


_database_checker = _DatabaseChecker()


def check_database() -> str:
    """ "ok", or "error: <what>" — "error: Timeout" when the database did not answer in time."""
    # The pool's own wait is DATABASE_TIMEOUT: a moment more, so that it reports first.
    return _database_checker.check(DATABASE_TIMEOUT + 0.5)


# One broker connection per broker configuration, kept for the life of the process: a health
# check every few seconds from a load balancer must not open (and tear down) a broker connection
# each time. It is kombu's, made by Celery as the producers' are, so the broker URL's options
# (rediss://…?ssl_cert_reqs=…) and broker_use_ssl apply: /healthz reaches the broker as the
# workers do, not with redis-py's own defaults.
_broker_connections: dict[str, Connection] = {}
# A kombu connection is not thread-safe, and health checks arrive on several server threads.
_broker_lock = threading.Lock()


def health_transport_options() -> dict:
    return {
        "socket_connect_timeout": 2,
        "socket_timeout": 2,
        "client_name": f"agent-org-health-{os.getpid()}",  # seen in CLIENT LIST
    }


def _broker_connection(app) -> Connection:
    conf = app.conf
    key = repr((conf.broker_write_url, conf.broker_use_ssl, conf.broker_transport_options))
    conn = _broker_connections.get(key)
    if conn is None:
        # Made once: kombu warns on every Connection to a rediss:// URL without SSL options.
        conn = app.connection_for_write(transport_options=health_transport_options())
        _broker_connections[key] = conn
    return conn


def check_broker() -> str:
    from config.celery import app

    try:
        with _broker_lock:
            conn = _broker_connection(app)
            if conn.transport.driver_type == "redis":
                # Connects on the first call only (one attempt, no retry loop); later calls
                # ping through the connection the channel's client keeps.
                conn.ensure_connection(max_retries=0)
                conn.default_channel.client.ping()
            else:  # the embedded filesystem broker: a directory, nothing to keep open
                with conn.clone() as fs:
                    fs.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def healthz(request):
    checks = {"database": check_database(), "broker": check_broker()}
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )
