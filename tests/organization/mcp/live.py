"""A live uvicorn server of the whole ASGI application on 127.0.0.1, in a thread, and MCP clients."""

import asyncio
import contextlib
import json
import socket
import threading
import time

import httpx2
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from config.asgi import build_asgi_application


class LiveServer:
    """`with LiveServer() as server:` serves `build_asgi_application()` at `server.url`."""

    def __init__(self, app=None, lifespan: str = "on"):
        self.app = app or build_asgi_application()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, lifespan=lifespan, log_level="warning", access_log=False, ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the live server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


def run(coro):
    """Run a client scenario (a coroutine) to its end from a synchronous test."""
    return asyncio.run(coro)


def http_transport(url: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def http_client(base_url: str, key: str | None, **kwargs) -> Client:
    """The SDK's own client over streamable HTTP to `<base_url>/mcp`, sending the key."""
    return Client(http_transport(f"{base_url}/mcp", key), **kwargs)


def stdio_client(key: str, env: dict, cwd: str, **kwargs) -> Client:
    """The SDK's own client launching `python manage.py mcp --key KEY`, as an MCP host does."""
    import sys

    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--key", key], env=env, cwd=cwd
    )
    return Client(params, **kwargs)


@contextlib.contextmanager
def raw_http(base_url: str):
    with httpx2.Client(base_url=base_url, timeout=30) as client:
        yield client


def data(result) -> dict | list:
    """The JSON a tool answered (a result or an error body): the text block of its result."""
    assert len(result.content) == 1 and result.content[0].type == "text", result
    return json.loads(result.content[0].text)


async def calls(url, key, *steps):
    """Run `(tool, arguments)` steps in one MCP session; return their results."""
    results = []
    async with http_client(url, key, read_timeout_seconds=60) as client:
        for name, arguments in steps:
            results.append(await client.call_tool(name, arguments))
    return results


def ok(result) -> dict:
    """The JSON of a tool call that succeeded."""
    assert result.is_error is False, result.content[0].text
    return data(result)
