"""Find (and, if down, start) the local PostgreSQL and Redis for the test suite.

Prints `KEY=value` lines for the environment of `make test`. Under CI=true a service that
cannot be reached is an error: those tests must run, not skip. PostgreSQL is required in any
case: on SQLite the suite's concurrent tests (collaboration threads, row locks) fail at random
with "database table is locked", so `make test` refuses and says how to start PostgreSQL.
"""

import os
import secrets
import socket
import subprocess
import sys
import time

PG = ("127.0.0.1", 5432, "postgres://postgres@127.0.0.1:5432/test")
REDIS = ("127.0.0.1", 6379, "redis://127.0.0.1:6379/0")
START = {
    "postgres": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "redis": 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
    "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log",
}


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


START_TIMEOUT_SECONDS = 20
NO_POSTGRES = """PostgreSQL is not reachable on {host}:{port} and could not be started.
The test suite needs it (on SQLite its concurrent tests fail at random with "database table is
locked"). Start it, e.g.:
    apt-get install -y postgresql && pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start
(trust authentication for user postgres on 127.0.0.1), or point DATABASE_URL at a server:
    DATABASE_URL=postgres://USER@HOST:5432/test make test"""


def ensure(name: str, host: str, port: int) -> bool:
    if reachable(host, port):
        return True
    subprocess.run(START[name], shell=True, capture_output=True)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if reachable(host, port):
            return True
        time.sleep(0.2)
    return False


def main() -> int:
    ci = os.environ.get("CI") == "true"
    lines = []
    for name, (host, port, url), var in (
        ("postgres", PG, "DATABASE_URL"),
        ("redis", REDIS, "REDIS_URL"),
    ):
        if os.environ.get(var):
            lines.append(f"{var}={os.environ[var]}")
            continue
        if ensure(name, host, port):
            lines.append(f"{var}={url}")
        elif name == "postgres":
            print(NO_POSTGRES.format(host=host, port=port), file=sys.stderr)
            return 1
        elif ci:
            print(f"{name} is not reachable on {host}:{port} and CI=true", file=sys.stderr)
            return 1
        else:
            print(f"note: {name} not reachable; tests that need it will skip", file=sys.stderr)
    # A throwaway key: settings refuse to start without one (DEBUG off); the benchmarks and
    # the suite's subprocesses read it from this environment.
    lines.append(f"SECRET_KEY={os.environ.get('SECRET_KEY') or secrets.token_urlsafe(50)}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
