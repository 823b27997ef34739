"""Find (and, if down, start) the local PostgreSQL and Redis for the test suite.

Prints `KEY=value` lines for the environment of `make test`. Under CI=true a service that
cannot be reached is an error: those tests must run, not skip.
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


def ensure(name: str, host: str, port: int) -> bool:
    if reachable(host, port):
        return True
    subprocess.run(START[name], shell=True, capture_output=True)
    deadline = time.monotonic() + 20
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
