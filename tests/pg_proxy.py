"""A TCP forwarder in front of PostgreSQL that can lose a COMMIT's answer: an ambiguous commit.

Armed, it forwards the next `COMMIT` (simple query protocol, as psycopg sends it) to the server,
reads the server's answer (the commit happened) and then closes the client's connection without
passing that answer on: the client sees its connection lost during COMMIT.

`cut_at(text)` instead cuts the connection, both ways, at the next message whose statement
contains `text`, before the server sees it: a connection killed mid-transaction.
"""

import socket
import struct
import threading
from contextlib import contextmanager

SPECIAL_REQUESTS = {80877103, 80877104, 80877102}  # SSL, GSSENC, cancel


def _recv_exact(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError
        data += chunk
    return data


class PgProxy:
    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self.cut_on: bytes | None = None
        self.was_cut = threading.Event()
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_at(self, text: bytes) -> None:
        self.cut_on = text

    def close(self) -> None:
        self._closing = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            state = {"drop": False}
            threading.Thread(
                target=self._client_to_server, args=(client, server, state), daemon=True
            ).start()
            threading.Thread(
                target=self._server_to_client, args=(client, server, state), daemon=True
            ).start()

    @staticmethod
    def _shut(*socks) -> None:
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _client_to_server(self, client, server, state) -> None:
        try:
            while True:  # untyped startup messages
                head = _recv_exact(client, 4)
                (length,) = struct.unpack("!I", head)
                body = _recv_exact(client, length - 4)
                server.sendall(head + body)
                (code,) = struct.unpack("!I", body[:4])
                if code not in SPECIAL_REQUESTS:
                    break
            while True:
                kind = _recv_exact(client, 1)
                head = _recv_exact(client, 4)
                (length,) = struct.unpack("!I", head)
                body = _recv_exact(client, length - 4)
                if self.cut_on is not None and self.cut_on in body:
                    self.cut_on = None
                    self.was_cut.set()
                    self._shut(client, server)
                    return
                if (
                    kind == b"Q"
                    and body.rstrip(b"\0").strip().upper() == b"COMMIT"
                    and (self.armed.is_set())
                ):
                    self.armed.clear()
                    state["drop"] = True
                server.sendall(kind + head + body)
        except (ConnectionError, OSError):
            self._shut(client, server)

    def _server_to_client(self, client, server, state) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    raise ConnectionError
                if state["drop"]:
                    # The server answered the COMMIT: it is done. The client never hears it.
                    self.dropped.set()
                    self._shut(client, server)
                    return
                client.sendall(data)
        except (ConnectionError, OSError):
            self._shut(client, server)


@contextmanager
def connections_through_proxy():
    """Every new connection of this process to the default database goes through a PgProxy
    (yielded) until the block ends; the pool is emptied on the way in and out."""
    from django.db import connection

    settings_dict = connection.settings_dict
    saved = settings_dict["HOST"], settings_dict["PORT"], dict(settings_dict["OPTIONS"])
    proxy = PgProxy(settings_dict["HOST"] or "127.0.0.1", int(settings_dict["PORT"] or 5432))
    connection.close()
    connection.close_pool()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    settings_dict["OPTIONS"] = {**saved[2], "sslmode": "disable", "gssencmode": "disable"}
    try:
        yield proxy
    finally:
        connection.close()
        connection.close_pool()
        settings_dict["HOST"], settings_dict["PORT"], settings_dict["OPTIONS"] = saved
        proxy.close()
        connection.close_pool()
