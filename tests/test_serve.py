"""`python -m config.serve`: its arguments and environment (docs/configuration.md, operations.md)."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from config import serve

BASE_DIR = Path(__file__).resolve().parents[1]


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
        cwd=BASE_DIR, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
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
