"""psycopg's pool behind Django on PostgreSQL (config/postgresql/base.py)."""

import os
import socket
import subprocess
import sys
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from config.postgresql.base import LivePool

pooled = bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))
pytestmark = pytest.mark.skipif(
    not pooled, reason="psycopg's pool is PostgreSQL's default (CI runs it)"
)


def side_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    return psycopg.connect(
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        dbname="postgres",
        autocommit=True,
    )


def backends_of(side, database: str) -> set[int]:
    rows = side.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [database],
    ).fetchall()
    return {pid for (pid,) in rows}


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_closed_is_never_handed_out():
    """After a database restart every idle pooled connection is dead: each gave one 500."""
    assert isinstance(connection.pool, LivePool)
    connection.ensure_connection()
    connection.close()  # back to the pool, idle
    database = connection.settings_dict["NAME"]
    with side_connection() as side:
        killed = backends_of(side, database)
        assert killed, "the pool holds no connection to kill"
        for pid in killed:
            side.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while backends_of(side, database) & killed:
            assert time.monotonic() < deadline, "the server did not end its backends"
            time.sleep(0.05)

        for _ in range(len(killed) + 1):
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
            connection.close()
        assert not backends_of(side, database) & killed


def test_health_waits_two_seconds_for_a_database_that_is_down_not_the_pools_timeout():
    """A load balancer's probe was held DATABASE_POOL_TIMEOUT (10 s by default) while
    PostgreSQL was down; here that timeout is two minutes and the check must answer well before."""
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        SECRET_KEY="x",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/nowhere",
        DATABASE_POOL="true",
        DATABASE_POOL_TIMEOUT="120",
    )
    code = (
        "import django; django.setup(); from config.health import check_database; "
        "print(check_database())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.strip() == "error: PoolTimeout"
