"""`make test` refuses clearly without PostgreSQL instead of falling back to SQLite (issue 8 §8)."""

import socket

from tests import services


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_make_test_refuses_without_postgresql_and_says_how_to_start_it(monkeypatch, capsys):
    port = unused_port()
    monkeypatch.setattr(services, "PG", ("127.0.0.1", port, f"postgres://x@127.0.0.1:{port}/t"))
    monkeypatch.setitem(services.START, "postgres", "true")  # nothing to start here
    monkeypatch.setattr(services, "START_TIMEOUT_SECONDS", 0.5)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/7")

    assert services.main() == 1
    out, err = capsys.readouterr()
    assert "DATABASE_URL" not in out
    assert f"PostgreSQL is not reachable on 127.0.0.1:{port}" in err
    assert "pg_ctlcluster" in err and "DATABASE_URL=postgres://" in err


def test_make_test_uses_a_reachable_postgresql(monkeypatch, capsys):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/7")
    assert services.main() == 0
    assert "DATABASE_URL=postgres://postgres@127.0.0.1:5432/test" in capsys.readouterr().out
