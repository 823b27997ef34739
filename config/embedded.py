"""`make run`: the embedded service, supervised. `python -m config.embedded`

One instance per var/ (a lock); prepares the database and the demo, runs the server, a worker
and beat as children logging to var/log/, restarts any that exits, and stops them on Ctrl-C.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from config.serve import die_with_parent

BASE_DIR = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
STOP_GRACE_SECONDS = 20  # celery's warm shutdown waits for running tasks; then they are killed
BACKOFF_MAX_SECONDS = 30
HEALTHY_AFTER_SECONDS = 60  # a child that ran this long starts again from the shortest backoff


def var_dir() -> Path:
    return Path(os.environ.get("VAR_DIR") or BASE_DIR / "var").resolve()


def say(message: str) -> None:
    print(f"[make run] {message}", flush=True)


def take_lock(var: Path):
    """The instance lock: an flock on var/run.lock, released by the kernel when we exit."""
    handle = open(var / "run.lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        state = read_state(var)
        where = f" (PID {state.get('pid')}, port {state.get('port')})" if state else ""
        say(
            f"Agent Org is already running from {var}{where}. Stop it with Ctrl-C in its "
            "terminal (or `kill <PID>`), or give this one another VAR_DIR."
        )
        return None
    return handle


def read_state(var: Path) -> dict:
    try:
        return json.loads((var / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def secret_key_file(var: Path) -> Path:
    """var/secret_key: made once (random), kept, so sessions survive restarts."""
    path = var / "secret_key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
    return path


def child_env(var: Path, port: int) -> dict:
    env = dict(os.environ, VAR_DIR=str(var), PORT=str(port), PYTHONUNBUFFERED="1")
    key_file = secret_key_file(var)
    env["SECRET_KEY_FILE"] = str(key_file)
    # Until settings read SECRET_KEY_FILE themselves, the key travels as SECRET_KEY too.
    env.setdefault("SECRET_KEY", key_file.read_text().strip())
    # The server listens on 127.0.0.1 only; a local webhook receiver is the usual demo (issue 8 §2
    # lets `make run` lift the private-address rule). Both can be overridden from the environment.
    env.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
    # One server process: the throttle's counters live in its memory (no Redis here), and SQLite
    # takes one writer at a time anyway.
    env.setdefault("WEB_WORKERS", "1")
    env.setdefault("WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
    return env


class Child:
    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name, self.argv, self.env = name, argv, env
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0
        self.backoff = 1.0
        self.restart_at: float | None = None
        self.starts = 0

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            # Its own session: the terminal's Ctrl-C reaches only us, and we ask each child once.
            self.process = subprocess.Popen(
                self.argv,
                cwd=BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.started_at = time.monotonic()
        self.restart_at = None
        self.starts += 1

    def check(self) -> None:
        """Notice an unexpected exit and schedule the restart; do it when its time has come."""
        now = time.monotonic()
        if self.restart_at is not None:
            if now >= self.restart_at:
                say(f"restarting the {self.name}")
                self.start()
            return
        code = self.process.poll()
        if code is None:
            return
        # What it started goes with it: a server's workers outliving it kept the port, so
        # every restart found it taken, and Ctrl-C left them serving.
        self.kill()
        if now - self.started_at >= HEALTHY_AFTER_SECONDS:
            self.backoff = 1.0
        say(
            f"the {self.name} exited (code {code}); restarting it in {self.backoff:.0f} s "
            f"(its log: {self.log_path})"
        )
        self.restart_at = now + self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX_SECONDS)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL the child's whole process group (its own session): the server's workers
        too, which would otherwise outlive it, still serving on the port."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()


def setup(env: dict) -> bool:
    """Database, static files, the demo and the admin user: output to this terminal."""
    python = str(BIN / "python")
    steps = [
        ["migrate", "--noinput", "-v", "0"],
        ["collectstatic", "--noinput", "-v", "0"],
        ["seed_demo"],
        ["ensure_admin"],
    ]
    for step in steps:
        if subprocess.run([python, "manage.py", *step], cwd=BASE_DIR, env=env).returncode != 0:
            say(f"`manage.py {' '.join(step)}` failed; nothing was started.")
            return False
    return True


def write_state(var: Path, port: int, children: list[Child]) -> None:
    state = {
        "pid": os.getpid(),
        "port": port,
        "children": {c.name: c.process.pid for c in children if c.alive()},
        "starts": {c.name: c.starts for c in children},
    }
    tmp = var / "run.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(var / "run.json")


def main() -> int:
    # var/ holds the database (webhook secrets, admin sessions), the logs and the broker's
    # messages: this user's alone, the children's files too (they inherit the umask).
    os.umask(0o077)
    var = var_dir()
    # As the settings read numbers: blank is the default, ASCII digits only (int() took
    # "8_000", "+80" and "٣", and refused a blank PORT).
    raw_port = os.environ.get("PORT", "").strip() or "8000"
    port = int(raw_port) if raw_port.isascii() and raw_port.isdigit() else 0
    if not 1 <= port <= 65535:
        say(f"PORT must be a number from 1 to 65535, not {os.environ['PORT']!r}.")
        return 2
    try:
        var.mkdir(parents=True, exist_ok=True)
        var.chmod(0o700)
        lock = take_lock(var)
    except OSError as exc:  # not a directory, not ours, not writable: say so, no traceback
        why = "it is not a directory" if isinstance(exc, FileExistsError) else exc.strerror
        say(
            f"VAR_DIR {var} cannot be used: {why or exc}. Give it a directory this "
            "user can write, e.g. VAR_DIR=/tmp/agent-org make run."
        )
        return 2
    if lock is None:
        return 1
    if not port_is_free(port):
        say(f"Port {port} is in use by another program: choose another with PORT=<port> make run.")
        return 1
    log_dir = var / "log"
    log_dir.mkdir(exist_ok=True)
    env = child_env(var, port)

    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if not setup(env) or stopping:
        return 1 if not stopping else 0

    children = [
        Child(
            "server",
            [sys.executable, "-m", "config.serve", "--host", "127.0.0.1", "--port", str(port)],
            env,
            log_dir,
        ),
        Child(
            "worker",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "-l",
                "info",
            ],
            env,
            log_dir,
        ),
        Child("beat", [str(BIN / "celery"), "-A", "config", "beat", "-l", "info"], env, log_dir),
    ]
    for child in children:
        child.start()
    write_state(var, port, children)
    say(
        f"Agent Org on http://127.0.0.1:{port} (admin: /admin/, API docs: /api/docs/). "
        f"Logs: {log_dir}/server.log, worker.log, beat.log. Ctrl-C stops everything."
    )
    while not stopping:
        starts = [c.starts for c in children]
        for child in children:
            child.check()
        if [c.starts for c in children] != starts:
            write_state(var, port, children)
        time.sleep(0.2)

    say("stopping the server, the worker and beat …")
    for child in children:
        child.signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while any(c.alive() for c in children) and time.monotonic() < deadline:
        if len(stopping) > 1:  # a second Ctrl-C: no more waiting
            break
        time.sleep(0.1)
    for child in children:
        if child.alive():
            say(f"the {child.name} did not stop in time: killed")
        child.kill()  # its group, even once it is gone: what it started may still run
    (var / "run.json").unlink(missing_ok=True)
    say("stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
