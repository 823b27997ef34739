"""ASGI entry point: the REST API (Django, as WSGI) for everything, the MCP server at /mcp.

`python -m config.serve` (what `make run` starts, and the production command) serves it.
Django's views are synchronous: served through Django's own ASGI handler, every request pays
asgiref's hops between the event loop and its threads (several times the view's own CPU,
bench/serving.py). So Django runs as the WSGI application it is, in a thread pool of
`WSGI_THREADS`, one hop per request (a2wsgi); only /mcp, which is asynchronous, runs on the
event loop. The MCP session manager runs in this application's lifespan.
"""

import os

from a2wsgi import WSGIMiddleware
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
wsgi_application = get_wsgi_application()

# Imported after Django is set up: the MCP server reads the tool registry and the models.
from django.conf import settings  # noqa: E402

from organization.mcp_server.gate import MCP_PATH, McpHttpApp  # noqa: E402


class AgentOrgASGI:
    """The service's ASGI application: /mcp to the MCP server, everything else to Django.

    It owns the ASGI lifespan, because the MCP session manager must run for the whole life
    of the server (python-sdk#1467); Django does not speak lifespan.
    """

    def __init__(self, django_app, mcp_app: McpHttpApp):
        self.django_app = django_app
        self.mcp_app = mcp_app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == MCP_PATH or path == MCP_PATH + "/"):
            await self.mcp_app(scope, receive, send)
            return
        await self.django_app(scope, receive, send)

    async def lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.mcp_app.startup()
                except Exception as exc:  # pragma: no cover - reported to the server
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.mcp_app.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


def django_as_asgi(wsgi_app=None) -> WSGIMiddleware:
    """Django's WSGI application behind one thread hop per request."""
    return WSGIMiddleware(wsgi_app or wsgi_application, workers=settings.WSGI_THREADS)


def build_asgi_application(django_app=None) -> AgentOrgASGI:
    """A fresh application (a session manager runs only once, so tests build one per server)."""
    return AgentOrgASGI(django_app or django_as_asgi(), McpHttpApp())


application = build_asgi_application()
