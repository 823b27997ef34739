"""A TCP forwarder in front of Redis that a test can stop and start: a broker outage on demand.

`stop()` closes the listening socket and every forwarded connection (clients see a reset, then
"connection refused" while it is down); `start()` listens again on the same port. It runs an
asyncio loop in a daemon thread of the test process.
"""

import asyncio
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class BrokerProxy:
    def __init__(self, upstream_url: str):
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 6379)
        # A port picked by the OS, kept across stop/start so clients reconnect to the same URL.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        netloc = f"127.0.0.1:{self.port}"
        if parts.password:
            netloc = f":{parts.password}@{netloc}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        self._call(self._start())

    def stop(self) -> None:
        self._call(self._stop())

    def close(self) -> None:
        if self.running:
            self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    async def _start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", self.port, reuse_address=True
            )

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _serve(self, client_reader, client_writer) -> None:
        self._tasks.add(asyncio.current_task())
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.transport.abort()
            return
        pair = {client_writer, upstream_writer}
        self._writers |= pair

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.transport.abort()

        try:
            await asyncio.gather(
                pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer)
            )
        finally:
            self._writers -= pair
            self._tasks.discard(asyncio.current_task())
