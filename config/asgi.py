"""ASGI entry point: Django for everything, plus the MCP server (streamable HTTP) at /mcp.

`uvicorn config.asgi:application` (what `make run` starts) serves both; the MCP session
manager runs in this application's lifespan.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

# Imported after Django is set up: the MCP server reads the tool registry and the models.
from organization.mcp_server.gate import MCP_PATH, McpHttpApp  # noqa: E402


class AgentOrgASGI:
    """The service's ASGI application: /mcp to the MCP server, everything else to Django.

    It owns the ASGI lifespan, because the MCP session manager must run for the whole life
    of the server (python-sdk#1467); Django's own handler does not speak lifespan.
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


def build_asgi_application(django_app=None) -> AgentOrgASGI:
    """A fresh application (a session manager runs only once, so tests build one per server)."""
    if django_app is None:
        django_app = get_asgi_application()
    return AgentOrgASGI(django_app, McpHttpApp())


application = build_asgi_application(django_application)
