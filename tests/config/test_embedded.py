"""`make run`'s supervisor, config/embedded.py, started for real (issue 8 §1 and §5).

One instance on a free port with a temporary VAR_DIR, the embedded default (SQLite, filesystem
broker, offline provider): a second start refuses without touching it, a killed worker or beat
comes back, Ctrl-C stops every child cleanly with exit 0. Every wait has a deadline.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.config.waiting import wait_for

# `make run` starts a real Celery worker and beat: these run in `make test`, not test-fast.
pytestmark = pytest.mark.worker

BASE_DIR = Path(settings.BASE_DIR)
# Not ours: the embedded default must not see the test suite's PostgreSQL and Redis.
FOREIGN = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "TEST_DATABASE_NAME",
    "CI",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "PORT",
    "VAR_DIR",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "LLM_PROVIDER",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def embedded_env(var: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    return env | {"VAR_DIR": str(var), "PORT": str(port)}


def start(var: Path, port: int, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "config.embedded"],
            cwd=BASE_DIR,
            env=embedded_env(var, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def state(var: Path) -> dict:
    try:
        return json.loads((var / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by the supervisor) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    port = free_port()
    log = var.parent / f"{var.name}-supervisor.log"
    proc = start(var, port, log)
    try:
        wait_for(lambda: healthy(port) or proc.poll() is not None, 300, "the server")
        assert proc.poll() is None, log.read_text()
        wait_for(lambda: len(state(var).get("children", {})) == 3, 30, "three children")
        yield proc, var, port, log
    finally:
        stop_stack(proc)


def stop_stack(proc) -> None:
    """Ctrl-C, as a user stops `make run`; killed if it does not stop within a minute."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_it_serves_with_a_kept_secret_key_file_and_logs_under_var_log(running):
    proc, var, port, log = running
    key_file = var / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert len(key_file.read_text()) >= 50
    server = state(var)["children"]["server"]
    environ = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{server}/environ").read_text().split("\0")
        if "=" in item
    )
    assert environ["SECRET_KEY_FILE"] == str(key_file.resolve())
    assert environ["WEBHOOK_ALLOW_PRIVATE_NETWORKS"] == "true"
    assert {p.name for p in (var / "log").iterdir()} >= {"server.log", "worker.log", "beat.log"}
    assert "Admin user created" in log.read_text()


def test_the_admin_logs_in_and_the_dashboard_of_the_demo_renders(running):
    """The console's pages on SQLite, the database `make run` serves (the suite's own runs are on
    PostgreSQL): the printed password logs in and the dashboard with its charts answers 200."""
    proc, var, port, log = running
    password = re.search(r"username: admin\s+password: (\S+)", log.read_text()).group(1)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as browser:
        form = browser.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        answer = browser.post(
            "/admin/login/?next=/admin/",
            data={"csrfmiddlewaretoken": token, "username": "admin", "password": password},
            headers={"Referer": f"http://127.0.0.1:{port}/admin/login/"},
        )
        assert answer.status_code == 302, answer.text[:500]
        dashboard = browser.get("/admin/")
    assert dashboard.status_code == 200, dashboard.text[:2000]
    assert 'id="chart-card-load"' in dashboard.text


def test_a_second_start_says_so_and_exits_non_zero_without_touching_the_first(running, tmp_path):
    proc, var, port, _ = running
    before = state(var)
    second = subprocess.run(
        [sys.executable, "-m", "config.embedded"],
        cwd=BASE_DIR,
        env=embedded_env(var, free_port()),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert f"already running from {var.resolve()} (PID {proc.pid}, port {port})" in second.stdout
    assert state(var) == before
    assert all(alive(pid) for pid in before["children"].values())
    assert healthy(port)


def test_a_start_on_a_busy_port_says_so_and_makes_nothing(running, tmp_path):
    _, _, port, _ = running
    other = tmp_path / "var"
    refused = subprocess.run(
        [sys.executable, "-m", "config.embedded"],
        cwd=BASE_DIR,
        env=embedded_env(other, port),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert f"Port {port} is in use" in refused.stdout
    assert not (other / "db.sqlite3").exists()


@pytest.mark.parametrize("name", ["worker", "beat", "server"])
def test_a_worker_beat_or_server_that_died_is_restarted(running, name):
    """The server too: killed outright, its uvicorn workers outlived it and kept the port, so
    each new server found it taken and exited, restarted for ever; Ctrl-C left them serving."""
    _, var, port, _ = running
    dead = state(var)["children"][name]
    left = [int(p) for p in Path(f"/proc/{dead}/task/{dead}/children").read_text().split()]
    log = var / "log" / f"{name}.log"
    offset = log.stat().st_size
    os.kill(dead, signal.SIGKILL)
    fresh = wait_for(
        lambda: (
            (pid := state(var)["children"].get(name)) not in (None, dead) and alive(pid) and pid
        ),
        30,
        f"a new {name}",
    )
    assert state(var)["starts"][name] == 2
    assert not alive(dead) and alive(fresh)
    # The new one works: the worker consumes, beat schedules, the server serves.
    said = {"worker": " ready.", "beat": "beat: Starting...", "server": "startup complete"}[name]
    wait_for(lambda: said.encode() in log.read_bytes()[offset:], 120, f"the new {name} to start")
    assert healthy(port)
    assert not any(alive(pid) for pid in left), "what the dead one started still runs"
    assert state(var)["starts"][name] == 2  # started once more, not again and again


def test_ctrl_c_stops_every_child_and_exits_0(running):
    proc, var, _, log = running
    children = list(state(var)["children"].values())
    worker_log = var / "log" / "worker.log"
    # Up and consuming before it is asked to stop.
    wait_for(lambda: " ready." in worker_log.read_text(), 120, "the worker")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    wait_for(lambda: not any(alive(pid) for pid in children), 10, "every child to be gone")
    # One warm shutdown, of the live worker (today's Makefile logged thousands).
    assert worker_log.read_text().count("Warm shutdown") == 1
    said = log.read_text()
    assert "did not stop in time" not in said
    assert "stopped." in said
    assert not (var / "run.json").exists()
