"""`/healthz`'s database check answers within its bound however the database fails to answer
(config/health.py): a server that accepts and never speaks, a connection the network froze."""

import os
import socket
import subprocess
import sys
import threading

import pytest
from django.conf import settings
from django.db import connection

from tests.pg_proxy import PgProxy

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL (a TCP server to cut off)"
)

CHECK = (
    "import sys, time, django; django.setup(); from config.health import check_database\n"
    "for line in sys.stdin:\n"
    "    started = time.monotonic(); result = check_database()\n"
    "    print(result, round(time.monotonic() - started, 1), flush=True)\n"
)


def checker(port: int, *, pool: bool) -> subprocess.Popen:
    """A process of the service whose database is at 127.0.0.1:`port`: each line it is sent
    runs the check once, and it prints the result and the seconds it took."""
    params = connection.get_connection_params()
    url = f"postgres://{params.get('user') or 'postgres'}@127.0.0.1:{port}/{params['dbname']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        SECRET_KEY="x",
        DATABASE_URL=url,
        DATABASE_POOL="true" if pool else "false",
        DATABASE_POOL_TIMEOUT="120",
    )
    if params.get("password"):
        env["PGPASSWORD"] = params["password"]
    return subprocess.Popen(
        [sys.executable, "-c", CHECK],
        cwd=settings.BASE_DIR,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def check(process: subprocess.Popen) -> tuple[str, float]:
    process.stdin.write("\n")
    process.stdin.flush()
    answer = []
    reader = threading.Thread(target=lambda: answer.append(process.stdout.readline()))
    reader.start()
    reader.join(timeout=30)
    assert answer and answer[0], "no answer in 30 s"
    result, seconds = answer[0].rsplit(" ", 1)
    return result, float(seconds)


class FreezingProxy:
    """A TCP forwarder to PostgreSQL that can stop passing bytes while keeping every connection
    open: what a network partition looks like from the service's side."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.frozen = threading.Event()
        self.closed = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            if self.closed:  # closed while this one was being connected
                self._shut(client, server)
                return
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.frozen.is_set():
                    sink.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self._shut(*self.sockets)

    # shutdown first: close() alone leaves the connection open while a pump's recv() still
    # holds the socket, and the test database could then not be dropped.
    _shut = staticmethod(PgProxy._shut)


@pytest.fixture
def silent_server():
    """A port that accepts connections and never answers (a hung server, a black hole)."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        yield listener.getsockname()[1]


@pytest.mark.parametrize("pool", [False, True])
def test_a_server_that_never_answers_is_reported_within_the_bound(silent_server, pool):
    process = checker(silent_server, pool=pool)
    try:
        for _ in range(2):  # the second probe too, while the first check still hangs
            result, seconds = check(process)
            assert result.startswith("error: "), result
            assert seconds < 4, seconds
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("pool", [False, True])
def test_a_connection_the_network_froze_is_reported_within_the_bound(pool):
    params = connection.get_connection_params()
    proxy = FreezingProxy((params.get("host") or "127.0.0.1", int(params.get("port") or 5432)))
    process = checker(proxy.port, pool=pool)
    try:
        assert check(process)[0] == "ok"  # a connection is open (the pool's, or the thread's)
        proxy.frozen.set()
        result, seconds = check(process)
        assert result == "error: Timeout" and seconds < 4, (result, seconds)
    finally:
        process.kill()
        process.wait()
        proxy.close()
