"""`make run`'s embedded default (config/embedded.py) as a team would use it: several agents at
once on SQLite, a worker killed mid-session on a broker that does not re-deliver, an impatient
second Ctrl-C, and the files under var/ that hold secrets. Each stack is started for real, as
tests/config/test_embedded.py does, with a temporary VAR_DIR; every wait has a deadline.
"""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from config.embedded import port_is_free
from tests.config.test_embedded import (
    BASE_DIR,
    alive,
    embedded_env,
    free_port,
    healthy,
    start,
    state,
    stop_stack,
)
from tests.config.waiting import wait_for

# Real worker and beat processes: `make test`, not test-fast.
pytestmark = pytest.mark.worker


def start_stack(tmp_path_factory, extra_env: dict | None = None):
    var = tmp_path_factory.mktemp("var")
    port = free_port()
    log = var.parent / f"{var.name}-supervisor.log"
    saved = {k: os.environ.get(k) for k in extra_env or {}}
    os.environ.update(extra_env or {})  # start() builds the children's environment from ours
    try:
        proc = start(var, port, log)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    wait_for(lambda: healthy(port) or proc.poll() is not None, 300, "the server")
    assert proc.poll() is None, log.read_text()
    wait_for(lambda: len(state(var).get("children", {})) == 3, 30, "three children")
    wait_for(lambda: " ready." in (var / "log" / "worker.log").read_text(), 120, "the worker")
    return proc, var, port


def manage(var: Path, port: int, *args) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=embedded_env(var, port),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()


def call(port: int, key: str, method: str, path: str, body=None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def silent_llm() -> socket.socket:
    """An OpenAI-compatible address that accepts and never answers: a slow model."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """One stack for this module, whose sessions may call a model that never answers."""
    llm = silent_llm()
    proc, var, port = start_stack(
        tmp_path_factory,
        {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{llm.getsockname()[1]}/v1",
            "COLLAB_AGENT_TIMEOUT": "600",
            "COLLAB_LEASE_SECONDS": "3",
            "COLLAB_SWEEP_SECONDS": "2",
            "COLLAB_PROVIDER_MAX_RETRIES": "0",
        },
    )
    try:
        yield var, port
    finally:
        stop_stack(proc)
        llm.close()


def test_nothing_under_var_is_readable_by_others(stack):
    """The database holds the organizations' webhook secrets and the admin's sessions. (The
    static files keep their package's modes: public assets, behind var/'s 700 anyway.)"""
    var, _ = stack
    readable = []
    for path in [var, *var.rglob("*")]:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # a broker message the live worker consumed meanwhile
            continue
        if (
            mode & 0o077
            and not stat.S_ISLNK(mode)
            and path.relative_to(var).parts[:1] != ("static",)
        ):
            readable.append(f"{oct(mode & 0o777)} {path.relative_to(var)}")
    assert not readable, sorted(readable)


def test_it_serves_with_one_process(stack):
    """The throttle counts in the server's memory (no Redis here): with a process per core it
    let through that many times its rate."""
    var, _ = stack
    assert (var / "log" / "server.log").read_text().splitlines()[0].startswith("serve: 1 worker(s)")


def test_several_agents_at_once_never_get_a_500(stack):
    """Eight clients hand managed Alice work while her runs write from the worker: on SQLite a
    transaction that read and then wrote failed at once ("database is locked", a 500)."""
    var, port = stack
    key = manage(var, port, "create_api_key", "--org", "demo")
    statuses, failures = Counter(), []
    deadline = time.monotonic() + 20

    def agent_at_work(n):
        i = 0
        while time.monotonic() < deadline:
            i += 1
            status, body = call(
                port,
                key,
                "POST",
                "/api/tasks",
                {
                    "title": f"load {n}-{i}",
                    "required_expertise": "PostgreSQL",
                    "agent_id": "agent-alice",
                },
            )
            answers = [(status, body)]
            if status == 201:
                task = json.loads(body)["id"]
                answers += [
                    call(port, key, "POST", f"/api/tasks/{task}/comments", {"body": "news?"}),
                    call(port, key, "GET", f"/api/tasks/{task}"),
                    call(port, key, "POST", f"/api/tasks/{task}/cancel", {"reason": "enough"}),
                ]
            for status, body in answers:
                statuses[status] += 1
                if status >= 500:
                    failures.append((status, body[:200]))

    threads = [threading.Thread(target=agent_at_work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses[201] > 0
    assert not failures, (dict(statuses), failures[:3])


def test_a_session_whose_worker_died_is_sent_again(stack):
    """The filesystem broker deletes a message as its worker takes it: killed mid-session, the
    worker takes the session with it. Beat's sweep sends it again once its lease is stale."""
    var, port = stack
    key = manage(var, port, "create_api_key", "--org", "demo")
    status, body = call(
        port,
        key,
        "POST",
        "/api/collaborations",
        {
            "task": "Monolith or microservices?",
            "synthesis": "vote",
            "agents": [{"name": "architect", "config": {"provider": "openai", "model": "slow"}}],
        },
    )
    assert status == 202, body
    session = json.loads(body)["id"]
    log = var / "log" / "worker.log"

    def received() -> int:
        lines = log.read_text().splitlines()
        return sum("run_session[" in line and line.endswith(" received") for line in lines)

    def session_status() -> str:
        return json.loads(call(port, key, "GET", f"/api/collaborations/{session}")[1])["status"]

    wait_for(lambda: session_status() == "running" and received(), 60, "the session to run")
    before, worker = received(), state(var)["children"]["worker"]
    os.kill(worker, signal.SIGKILL)
    wait_for(
        lambda: (pid := state(var)["children"].get("worker")) not in (None, worker) and alive(pid),
        30,
        "the supervisor to restart the worker",
    )
    wait_for(lambda: received() > before, 60, "the session to be sent again")


def children_of(pid: int) -> list[int]:
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def test_a_second_ctrl_c_leaves_no_server_process_behind(tmp_path_factory):
    """The second Ctrl-C kills each child at once: the server's parent died before it could stop
    its uvicorn workers, which went on serving on the port."""
    proc, var, port = start_stack(tmp_path_factory)
    workers = []
    try:
        server = state(var)["children"]["server"]
        workers = wait_for(lambda: children_of(server), 30, "the server's workers")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)  # a person's second press, not waiting for work
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        wait_for(lambda: not any(alive(pid) for pid in workers), 10, "the workers to be gone")
        assert port_is_free(port)
    finally:
        stop_stack(proc)
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
