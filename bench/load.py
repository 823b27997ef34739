"""HTTP load for the benchmarks: servers in their own processes, load from `wrk`.

The load generator never shares a Python interpreter with the server, and never opens a
connection per request: wrk (C, keep-alive connections, Lua scripts for POSTs) drives the
server, and each run reports the CPU the client, the server and PostgreSQL spent, so a run in
which the client was the bottleneck is told apart (`Load.client_bound`).

Not a benchmark itself (`make bench` lists the scripts it runs).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TICKS = os.sysconf("SC_CLK_TCK")

# The client may take at most this share of the CPU the run used (client + server + database);
# above it, the figure measures wrk, not the service.
MAX_CLIENT_SHARE = 0.25


def require_wrk() -> str:
    wrk = shutil.which("wrk")
    if wrk is None:
        sys.exit("the HTTP benchmarks need wrk: apt-get install wrk (make bench does it)")
    return wrk


# --- CPU accounting from /proc ---------------------------------------------------------


def _cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def tree_of(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        with contextlib.suppress(FileNotFoundError):
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                todo.extend(int(c) for c in children)
    return pids


def postgres_pids() -> list[int]:
    """The PostgreSQL backends serving this bench's database (DATABASE_URL): not the server's
    other databases, whose clients (a test run next door) would count against the bench."""
    import psycopg

    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


def cpu_of(pids: list[int]) -> dict[int, float]:
    return {p: _cpu_of(p) for p in pids}


def cpu_since(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds of `pids` since `before` (a backend that is new counts all its CPU)."""
    return sum(cpu - before.get(p, 0.0) for p, cpu in cpu_of(pids).items())


# --- servers ---------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(kind: str, port: int, workers: int | None) -> list[str]:
    """`serve`: what `make run` and production run (config/serve.py, ASGI, REST as WSGI
    inside; `workers` None: its default); `gunicorn`: Django's WSGI application under gunicorn's
    sync workers; `asgi-django`: Django's own ASGI handler under uvicorn, as the service was
    served before."""
    if kind == "serve":
        command = [sys.executable, "-m", "config.serve", "--host", "127.0.0.1", "--port", str(port)]
        return command if workers is None else [*command, "--workers", str(workers)]
    if kind == "gunicorn":
        return [str(BIN / "gunicorn"), "config.wsgi:application", "-b", f"127.0.0.1:{port}",
                "-w", str(workers), "--log-level", "warning"]  # fmt: skip
    if kind == "asgi-django":
        return [str(BIN / "uvicorn"), "django.core.asgi:get_asgi_application", "--factory",
                "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
                "--no-access-log", "--log-level", "warning"]  # fmt: skip
    raise ValueError(kind)


@dataclass
class Server:
    kind: str
    url: str
    process: subprocess.Popen

    def pids(self) -> list[int]:
        return tree_of(self.process.pid)


@contextlib.contextmanager
def server(kind: str, *, workers: int | None = 2, env: dict | None = None) -> Iterator[Server]:
    """A server of the bench's settings (bench/bench_settings.py) on a free port, up when
    `/bench/minimal` answers; stopped (SIGTERM, then SIGKILL) on the way out."""
    port = free_port()
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.bench_settings",
        "SERVE_LOG_LEVEL": "warning",
        **(env or {}),
    }
    process = subprocess.Popen(
        server_command(kind, port, workers), cwd=ROOT, env=environment, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{kind} server exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/bench/minimal", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} server did not answer within 60 s")
            time.sleep(0.1)
        yield Server(kind, url, process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- wrk -------------------------------------------------------------------------------


@dataclass
class Load:
    label: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    socket_errors: int
    non_2xx: int
    client_cpu: float
    server_cpu: float
    db_cpu: float

    @property
    def client_share(self) -> float:
        total = self.client_cpu + self.server_cpu + self.db_cpu
        return self.client_cpu / total if total else 0.0

    @property
    def client_bound(self) -> bool:
        return self.client_share > MAX_CLIENT_SHARE

    @property
    def server_cpu_ms_per_request(self) -> float:
        return 1000 * self.server_cpu / self.requests if self.requests else 0.0

    @property
    def db_cpu_ms_per_request(self) -> float:
        return 1000 * self.db_cpu / self.requests if self.requests else 0.0

    def line(self) -> str:
        return (
            f"  {self.label:<34} {self.rps:8.1f} req/s  p50 {self.p50_ms:6.1f} ms  "
            f"server {self.server_cpu_ms_per_request:5.2f} ms CPU/req  "
            f"PostgreSQL {self.db_cpu_ms_per_request:5.2f} ms  "
            f"client {self.client_share:5.1%} of CPU  errors {self.socket_errors}"
            f"  non-2xx {self.non_2xx}"
        )


def _duration_ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise ValueError(f"wrk printed a duration this bench cannot read: {text!r}")
    number, unit = match.groups()
    return float(number) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]


def wrk(
    label: str,
    url: str,
    server: Server,
    *,
    seconds: int = 10,
    connections: int = 16,
    threads: int = 2,
    headers: dict | None = None,
    lua: str | None = None,
) -> Load:
    """Run wrk against `url`; `lua` is a wrk script (POST bodies, per-request paths)."""
    command = [require_wrk(), "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
               "--latency", "--timeout", "10s"]  # fmt: skip
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    script = None
    if lua:
        script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
        script.write(lua)
        script.close()
        command += ["-s", script.name]
    command.append(url)
    server_pids = server.pids()
    server_before, db_before = cpu_of(server_pids), cpu_of(postgres_pids())
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Read the pipes, then reap wrk with wait4 (communicate() would reap it without its rusage).
    out, err = process.stdout.read(), process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)  # wrk's own CPU, nobody else's
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}): {err.strip()}")
    server_cpu = cpu_since(server_before, server_pids)
    db_cpu = cpu_since(db_before, postgres_pids())
    if script:
        os.unlink(script.name)
    requests, seconds_taken = re.search(r"(\d+) requests in ([\d.]+)(s|m)", out).group(1, 2)
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p50 = re.search(r"^\s*50%\s+(\S+)", out, re.MULTILINE)
    client_cpu = usage.ru_utime + usage.ru_stime
    return Load(
        label=label,
        requests=int(requests),
        seconds=float(seconds_taken),
        rps=float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        p50_ms=_duration_ms(p50.group(1)) if p50 else 0.0,
        socket_errors=sum(int(n) for n in socket.groups()) if socket else 0,
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        client_cpu=client_cpu,
        server_cpu=server_cpu,
        db_cpu=db_cpu,
    )


def client_verdict(loads: list[Load]) -> int:
    """1 (and a message) if the client was the bottleneck of any run, else 0."""
    bound = [load for load in loads if load.client_bound]
    for load in bound:
        print(
            f"  the client was the bottleneck of '{load.label}' ({load.client_share:.0%} of the "
            f"CPU, limit {MAX_CLIENT_SHARE:.0%}): its figure measures wrk, not the service"
        )
    return 1 if bound else 0


if __name__ == "__main__":
    print("bench/load.py: the HTTP load harness of the bench scripts; nothing to measure")
