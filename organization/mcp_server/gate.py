"""The /mcp door (streamable HTTP): Host and Origin, then the bearer key of every request,
then the MCP SDK's session manager. Routed to by the project's ASGI app (config/asgi.py).
"""

import json
from contextlib import AsyncExitStack

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ..auth import bearer_token
from ..errors import error_body
from .server import SCOPE_KEY, build_server, close_db_connections, find_key

MCP_PATH = "/mcp"


async def send_json(send, status: int, body: dict, headers: list | None = None) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def header_of(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    """Exact match, `scheme://host:*` for any port, or `*` for every origin."""
    origin = origin.rstrip("/").lower()
    for entry in allowed:
        entry = entry.rstrip("/").lower()
        if entry == "*" or origin == entry:
            return True
        if entry.endswith(":*"):
            base = entry[:-2]
            port = origin.removeprefix(base + ":") if origin.startswith(base + ":") else None
            if origin == base or (port is not None and port.isdigit()):
                return True
    return False


def refusal_of(scope) -> tuple[int, dict] | None:
    """Host and Origin, checked before anything else (DNS rebinding, cross-site browsers).

    /mcp does not pass through Django, so its Host is checked here against the same
    ALLOWED_HOSTS. The SDK's own TransportSecuritySettings would answer text/plain and takes no
    Django host patterns, so the rule lives here and answers our error shape.
    """
    host = header_of(scope, b"host") or ""
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return 400, error_body(f"Host {host!r} is not allowed (ALLOWED_HOSTS).", "disallowed_host")
    origin = header_of(scope, b"origin")
    if origin is not None and not origin_allowed(origin, settings.MCP_ALLOWED_ORIGINS):
        return 403, error_body(
            f"Origin {origin!r} is not allowed (MCP_ALLOWED_ORIGINS).", "origin_not_allowed"
        )
    return None


class McpHttpApp:
    """ASGI app for /mcp: checks the key of every request, then hands over to the SDK.

    A Host outside ALLOWED_HOSTS → 400 `disallowed_host`; a browser Origin outside
    MCP_ALLOWED_ORIGINS → 403 `origin_not_allowed`. No key → 401 `authentication_required`; a bad or revoked key → 401
    `authentication_failed` (our error shape, with `WWW-Authenticate: Bearer`). The key is
    also handed to the SDK as its authenticated user, so a stateful MCP session
    (MCP_STATELESS=false) can only be continued with the key that opened it.
    """

    def __init__(self, *, json_response: bool = True, stateless: bool | None = None):
        self.server = build_server()
        # Stateless (MCP_STATELESS, the default): no session lives in one process's memory, so
        # any worker of `config.serve` answers any request; each request is checked by its key.
        if stateless is None:
            stateless = settings.MCP_STATELESS
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server, json_response=json_response, stateless=stateless
        )
        self._stack: AsyncExitStack | None = None

    async def startup(self) -> None:
        self._stack = AsyncExitStack()
        await self._stack.enter_async_context(self.session_manager.run())

    async def shutdown(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None
        await close_db_connections()

    async def __call__(self, scope, receive, send) -> None:
        refusal = refusal_of(scope)
        if refusal is not None:
            await send_json(send, *refusal)
            return
        if self._stack is None:
            # The session manager runs in the ASGI lifespan; a server started without one
            # (e.g. `uvicorn --lifespan off`) cannot serve MCP.
            body = error_body(
                "The MCP server is not running: serve the app with its ASGI lifespan on.",
                "mcp_unavailable",
            )
            await send_json(send, 503, body)
            return
        header = header_of(scope, b"authorization")
        challenge = [(b"www-authenticate", b'Bearer realm="mcp"')]
        if header is None:
            body = error_body(
                "Authentication required: send 'Authorization: Bearer <agent key>'.",
                "authentication_required",
            )
            await send_json(send, 401, body, challenge)
            return
        plaintext = bearer_token(header)
        key = await find_key(plaintext) if plaintext is not None else None
        if key is None:
            body = error_body("Invalid or revoked API key.", "authentication_failed")
            await send_json(send, 401, body, challenge)
            return
        token = AccessToken(token=plaintext, client_id=f"ao_{key.prefix}", scopes=[])
        scope = {**scope, SCOPE_KEY: key, "user": AuthenticatedUser(token)}
        await self.session_manager.handle_request(scope, receive, send)
