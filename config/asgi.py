"""ASGI entry point: Django for everything, plus the MCP server (streamable HTTP) at /mcp.

`uvicorn config.asgi:application` (what `make run` starts) serves both; the MCP session
manager runs in this application's lifespan.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

# Imported after Django is set up: the MCP server reads the tool registry and the models.
from organization.mcp_server import build_asgi_application  # noqa: E402

application = build_asgi_application(django_application)
