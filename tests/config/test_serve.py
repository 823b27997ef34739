"""`python -m config.serve`: its arguments and environment (docs/configuration.md, operations.md)."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from config import serve
from tests.config.waiting import wait_for

BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def supervised(monkeypatch):
    """What main() would supervise (host, port, workers), without starting anything."""
    calls = []
    monkeypatch.setattr(serve, "supervise", lambda h, p, c: calls.append((h, p, c)) or 0)
    for name in ("HOST", "PORT", "WEB_WORKERS", "SERVE_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_an_empty_host_means_127_0_0_1_not_every_interface(monkeypatch, supervised):
    """HOST= is the default: passed on as "", bind() would listen on every interface."""
    monkeypatch.setenv("HOST", "")
    serve.main([])
    assert supervised[0][0] == "127.0.0.1"


def test_an_empty_host_argument_is_refused(supervised):
    with pytest.raises(SystemExit) as exited:
        serve.main(["--host", ""])
    assert exited.value.code == 2
    assert supervised == []


@pytest.mark.parametrize(
    "flag, value, limits",
    [("--workers", v, "1 to 256") for v in ("-2", "0", "257", "two")]
    + [("--port", v, "1 to 65535") for v in ("0", "70000", "-1", "80x")],
)
def test_a_worker_count_or_port_out_of_range_is_refused(supervised, capsys, flag, value, limits):
    """--workers -2 started no worker and served nothing; 0 fell back to WEB_WORKERS."""
    with pytest.raises(SystemExit) as exited:
        serve.main([flag, value])
    assert exited.value.code == 2
    assert f"argument {flag}: must be a whole number from {limits}" in capsys.readouterr().err
    assert supervised == []


def test_good_arguments_are_what_is_supervised(supervised):
    serve.main(["--host", "0.0.0.0", "--port", "9000", "--workers", "3"])
    assert supervised == [("0.0.0.0", 9000, 3)]


def test_an_out_of_range_port_stops_the_command_with_a_message_not_a_traceback():
    """--port 70000 reached bind() and ended in an OverflowError traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "config.serve", "--port", "70000", "--workers", "1"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert "--port: must be a whole number from 1 to 65535" in done.stderr


@pytest.mark.parametrize("level, expected", [("", "info"), ("WARNING", "warning")])
def test_serve_log_level_empty_is_the_default_and_any_case_is_taken(monkeypatch, level, expected):
    import uvicorn

    monkeypatch.setenv("SERVE_LOG_LEVEL", level)
    levels = []
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: levels.append(self.config.log_level)
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.run_worker("127.0.0.1", port)
    assert levels == [expected]


def test_a_serve_log_level_typo_stops_the_worker_and_the_parent_naming_the_variable(
    monkeypatch, supervised
):
    """SERVE_LOG_LEVEL=loud killed each worker with uvicorn's bare `KeyError: 'loud'`, and the
    parent said only "a worker exited at start"."""
    monkeypatch.setenv("SERVE_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit, match="SERVE_LOG_LEVEL='loud'"):
        serve.run_worker("127.0.0.1", 0)
    with pytest.raises(SystemExit, match="SERVE_LOG_LEVEL='loud'"):
        serve.main([])
    assert supervised == []


def sqlite_env(tmp_path) -> dict:
    """The embedded default (SQLite and the filesystem broker under tmp_path): no server needed."""
    foreign = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TEST_DATABASE_NAME", "PORT")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k not in foreign}
    return env | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "x",
        "VAR_DIR": str(tmp_path / "var"),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_the_workers_do_not_outlive_a_killed_supervisor(tmp_path):
    """A `config.serve` parent killed outright (SIGKILL, the OOM killer) left its uvicorn workers
    serving on the port: the next server (make run restarts it) found the port taken and exited,
    again and again, and Ctrl-C of `make run` left the orphans serving."""
    port = free_port()
    parent = subprocess.Popen(
        [sys.executable, "-m", "config.serve", "--port", str(port), "--workers", "1"],
        cwd=BASE_DIR,
        env=sqlite_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers = []
    try:
        wait_for(lambda: listening(port), 60, "the server")
        workers = children(parent.pid)
        assert len(workers) == 1
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_for(lambda: gone(workers[0]), 30, f"worker {workers[0]} to exit")
        wait_for(lambda: not listening(port), 10, "the port to be free")
    finally:
        parent.kill()
        for pid in workers:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "host, reason",
    [
        ("192.0.2.1", "Cannot assign requested address"),  # TEST-NET-1: no machine has it
        ("no-such-host.invalid", "cannot listen on no-such-host.invalid:"),
    ],
)
def test_an_address_it_cannot_listen_on_is_said_as_it_is_not_as_a_port_in_use(capsys, host, reason):
    """HOST set to an address this machine does not have (or a name that does not resolve)
    was reported as "<host>:<port> is in use by another program"."""
    assert serve.supervise(host, free_port(), 1) == 1
    said = capsys.readouterr().out
    assert "in use" not in said
    assert said.startswith(f"serve: cannot listen on {host}:") and reason in said, said


def test_a_port_in_use_is_said_so(capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert serve.supervise("127.0.0.1", port, 1) == 1
    assert capsys.readouterr().out == f"serve: 127.0.0.1:{port} is in use by another program.\n"


@pytest.mark.parametrize("name", ["PORT", "WEB_WORKERS"])
@pytest.mark.parametrize("value", ["²", "٣"])
def test_digits_that_are_not_ascii_are_refused_with_a_message(monkeypatch, supervised, name, value):
    """PORT=² passed isdigit() and ended in int()'s ValueError traceback; PORT=٣ was port 3."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=rf"^{name}={value!r}: must be a whole number from 1 to"):
        serve.main([])
    assert supervised == []
