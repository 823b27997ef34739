"""ASGI entry point (`python -m config.serve`): Django as WSGI on the event loop's own thread for
everything, the MCP server at /mcp, the agents' A2A servers under /a2a/; the MCP session manager runs in the lifespan."""

import asyncio
import contextvars
import io
import json
import os

from a2wsgi.wsgi import build_environ
from django.core.wsgi import get_wsgi_application

from infrastructure.tracing import setup as setup_tracing

if not os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():  # unset or empty: the default
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
# Traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set: before Django builds its middleware.
setup_tracing(web=True)
django_application = get_wsgi_application()

# Imported after Django is set up: the MCP server reads the tool registry and the models.
from django.conf import settings  # noqa: E402

from config.guards import guarded  # noqa: E402

wsgi_application = guarded(django_application)

from a2a_server.app import A2A_PREFIX, A2AApp  # noqa: E402
from costs.pricing import load_price_table  # noqa: E402
from infrastructure.errors import error_body  # noqa: E402
from organization.mcp_server.gate import MCP_PATH, McpHttpApp  # noqa: E402


class AgentOrgASGI:
    """The service's ASGI application: /mcp to the MCP server, /a2a/ to the agents' A2A servers,
    everything else to Django. It owns the lifespan: the MCP session manager must run for the
    server's whole life (python-sdk#1467)."""

    def __init__(self, django_app, mcp_app: McpHttpApp, a2a_app: A2AApp | None = None):
        self.django_app = django_app
        self.mcp_app = mcp_app
        self.a2a_app = a2a_app or A2AApp()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == MCP_PATH or path == MCP_PATH + "/"):
            await self.mcp_app(scope, receive, send)
            return
        if scope["type"] == "http" and path.startswith(A2A_PREFIX):
            await self.a2a_app(scope, receive, send)
            return
        await self.django_app(scope, receive, send)

    async def lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    # A budget's check prices the worst case: loaded now, not in a request.
                    load_price_table()
                    await self.mcp_app.startup()
                except Exception as exc:  # pragma: no cover - reported to the server
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.mcp_app.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


class InlineDjango:
    """A WSGI application served from ASGI on the event loop's thread, with no thread hop: the body
    read first, then the view runs to its end as in a gunicorn sync worker (`WEB_WORKERS` is the
    concurrency), with no running loop and one context per process."""

    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app
        self.context = contextvars.copy_context()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = await self.read_body(receive)
        if body is None:
            return  # the client went away
        wsgi_environ = build_environ(scope, io.BytesIO(body))
        # A chunked body has no length: Django reads CONTENT_LENGTH bytes, and checks its limit.
        wsgi_environ.setdefault("CONTENT_LENGTH", str(len(body)))
        status, headers, chunks = self.call(wsgi_environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"".join(chunks)})

    @staticmethod
    async def read_body(receive) -> bytes | None:
        """The request body, at most one byte past Django's limit (enough for it to refuse)."""
        limit = (settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2**62) + 1
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if not message.get("more_body") or len(body) >= limit:
                return bytes(body[:limit])

    def call(self, wsgi_environ) -> tuple[int, list, list[bytes]]:
        started = []
        chunks = []

        def start_response(status, headers, exc_info=None):
            started[:] = [
                int(status.split(" ", 1)[0]),
                [
                    (name.lower().encode("latin1"), value.encode("latin1"))
                    for name, value in headers
                ],
            ]
            return chunks.append

        loop = asyncio.get_running_loop()
        asyncio._set_running_loop(None)
        try:
            self.context.run(self.run_app, wsgi_environ, start_response, chunks)
        finally:
            asyncio._set_running_loop(loop)
        if not started:  # pragma: no cover - Django always answers
            return (
                500,
                [(b"content-type", b"application/json")],
                [json.dumps(error_body("Internal server error.", "server_error")).encode()],
            )
        return started[0], started[1], chunks

    def run_app(self, wsgi_environ, start_response, chunks) -> None:
        result = self.wsgi_app(wsgi_environ, start_response)
        try:
            chunks.extend(result)
        finally:
            if hasattr(result, "close"):
                result.close()


def django_as_asgi(wsgi_app=None) -> InlineDjango:
    """Django's WSGI application, called on the event loop's thread."""
    return InlineDjango(wsgi_app or wsgi_application)


def build_asgi_application(django_app=None) -> AgentOrgASGI:
    """A fresh application (a session manager runs only once, so tests build one per server)."""
    return AgentOrgASGI(django_app or django_as_asgi(), McpHttpApp())


application = build_asgi_application()
