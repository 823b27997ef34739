"""The HTTP server: `python -m config.serve [--host H] [--port P] [--workers N]`.

`--workers` uvicorn processes, each on its own SO_REUSEPORT socket, under a parent that restarts
one that dies (all stop if one dies early: a broken configuration) and stops them on SIGTERM.
The workers write their Prometheus samples to one directory the parent empties at start, so any
of them answers `/metrics` for all (prometheus_client's multiprocess mode).
"""

import argparse
import ctypes
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EARLY_DEATH_SECONDS = 5
STOP_GRACE_SECONDS = 15
DEFAULT_HOST = "127.0.0.1"
MAX_WORKERS = 256
# uvicorn's own names (uvicorn.config.LOG_LEVELS); it fails on any other with a bare KeyError.
SERVE_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def listening_socket(host: str, port: int, *, reuse_port: bool = True) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def serve_log_level() -> str:
    """SERVE_LOG_LEVEL, or info when unset or empty; a typo stops with a message naming it."""
    raw = os.environ.get("SERVE_LOG_LEVEL", "").strip()
    if not raw:
        return "info"
    if raw.lower() not in SERVE_LOG_LEVELS:
        sys.exit(f"SERVE_LOG_LEVEL={raw!r}: use one of {', '.join(SERVE_LOG_LEVELS)}.")
    return raw.lower()


def run_worker(host: str, port: int) -> None:
    """One server process: uvicorn on its own SO_REUSEPORT socket."""
    import uvicorn

    log_level = serve_log_level()
    sock = listening_socket(host, port)
    config = uvicorn.Config(
        "config.asgi:application",
        loop="uvloop",
        http="httptools",
        ws="none",
        lifespan="on",
        access_log=False,
        log_level=log_level,
        timeout_graceful_shutdown=STOP_GRACE_SECONDS - 5,
    )
    uvicorn.Server(config).run(sockets=[sock])


def env_int(name: str, default: int, *, low: int, high: int) -> int:
    """A whole number from the environment, or the default; a typo stops with a message."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        sys.exit(f"{name}={raw!r}: must be a whole number from {low} to {high}.")
    return int(raw)


def bounded(low: int, high: int):
    """An argparse type: a whole number from low to high (anything else: parser.error)."""

    def parse(raw: str) -> int:
        if not (raw.isascii() and raw.strip().isdigit()) or not low <= int(raw) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}")
        return int(raw)

    return parse


def cannot_listen(host: str, port: int) -> str | None:
    """Why the workers could not listen on host:port, or None. Checked without SO_REUSEPORT,
    which would let them share a port with another server of the same user."""
    try:
        listening_socket(host, port, reuse_port=False).close()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"{host}:{port} is in use by another program."
        # An address this machine does not have, a name that does not resolve, a port below
        # 1024 without the right: said as it is, not as "in use".
        return f"cannot listen on {host}:{port}: {exc.strerror or exc}."
    return None


def die_with_parent() -> None:
    """Linux (a child's preexec_fn): the child gets SIGTERM when its supervisor dies, even by
    SIGKILL (an OOM kill). A worker left behind would go on serving on the port, so that no new
    server could bind it (config.embedded's children too)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def metrics_directory() -> tuple[Path, bool]:
    """PROMETHEUS_MULTIPROC_DIR emptied of the samples a previous server left (counters start
    from zero with the server, as Prometheus expects), or a new directory of our own (True: the
    server removes it when it stops)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    if not given:
        return Path(tempfile.mkdtemp(prefix="agent-org-metrics-")), True
    directory = Path(given)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    return directory, False


class Workers:
    def __init__(self, host: str, port: int, count: int, metrics_dir: Path):
        self.command = [
            sys.executable,
            "-m",
            "config.serve",
            "--worker",
            "--host",
            host,
            "--port",
            str(port),
        ]
        self.processes: list[tuple[subprocess.Popen, float]] = []
        self.count = count
        self.metrics_dir = metrics_dir
        self.env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}

    def start_one(self) -> tuple[subprocess.Popen, float]:
        process = subprocess.Popen(self.command, env=self.env, preexec_fn=die_with_parent)
        return process, time.monotonic()

    def start(self) -> None:
        self.processes = [self.start_one() for _ in range(self.count)]

    def replace_dead(self) -> bool:
        """Restart workers that exited; False when one died right after starting."""
        for index, (process, started) in enumerate(self.processes):
            if process.poll() is None:
                continue
            if time.monotonic() - started < EARLY_DEATH_SECONDS:
                print(f"serve: a worker exited at start (code {process.returncode})", flush=True)
                return False
            print(
                f"serve: worker {process.pid} exited ({process.returncode}), restarting", flush=True
            )
            mark_dead(self.metrics_dir, process.pid)
            self.processes[index] = self.start_one()
        return True

    def stop(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process, _ in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()


def mark_dead(metrics_dir: Path, pid: int) -> None:
    """Drops a dead worker's live gauges; its counters stay in the sums."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(metrics_dir))


def supervise(host: str, port: int, count: int) -> int:
    problem = cannot_listen(host, port)
    if problem:
        print(f"serve: {problem}", flush=True)
        return 1
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.append(signum))
    metrics_dir, own = metrics_directory()
    workers = Workers(host, port, count, metrics_dir)
    try:
        workers.start()
        print(f"serve: {count} worker(s) on http://{host}:{port}", flush=True)
        healthy = True
        while not stopping and healthy:
            healthy = workers.replace_dead()
            time.sleep(0.2)
        workers.stop()
    finally:
        if own:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0 if healthy else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m config.serve", description=__doc__.split("\n")[0]
    )
    # An empty HOST is the default: bind() would take "" as every interface of the machine.
    parser.add_argument("--host", default=os.environ.get("HOST", "").strip() or DEFAULT_HOST)
    parser.add_argument(
        "--port", type=bounded(1, 65535), default=env_int("PORT", 8000, low=1, high=65535)
    )
    parser.add_argument("--workers", type=bounded(1, MAX_WORKERS), default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.host.strip():
        parser.error(f"argument --host: give an address, e.g. {DEFAULT_HOST} or 0.0.0.0")
    if args.worker:
        run_worker(args.host, args.port)
        return 0
    serve_log_level()  # a typo stops here, not as "a worker exited at start"
    workers = args.workers
    if workers is None:
        workers = env_int("WEB_WORKERS", os.cpu_count() or 1, low=1, high=MAX_WORKERS)
    return supervise(args.host, args.port, workers)


if __name__ == "__main__":
    sys.exit(main())
