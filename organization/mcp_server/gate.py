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

from infrastructure.errors import error_body
from infrastructure.throttling import locked_out_message

from ..auth import bearer_token
from .server import SCOPE_KEY, admit, build_server, close_db_connections

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


# JSON-RPC errors of the server's own range (-32000 to -32099): a refused key is -32001, as on
# stdio (server.KEY_REFUSED); any other refusal of the gate -32000.
RPC_KEY_REFUSED = -32001
RPC_REFUSED = -32000


async def send_refusal(
    send, status: int, message: str, code: str, headers: list | None = None
) -> None:
    """A refusal MCP clients can report: a JSON-RPC error (`id` null) whose message is our
    sentence and whose `data` is our code and status, with `success` and `code` at the top too
    (the SDK reports a bare error status only as "Server returned an error response").
    """
    rpc_code = RPC_KEY_REFUSED if status == 401 else RPC_REFUSED
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": rpc_code, "message": message, "data": {"code": code, "status": status}},
        "success": False,
        "code": code,
    }
    await send_json(send, status, body, headers)


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

    /mcp does not pass through Django, so its Host is checked here against ALLOWED_HOSTS.
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


# What a browser on an allowed origin may send and read (CORS): the MCP Inspector sends its
# key, the protocol's headers and a session's id, and reads the session id back.
CORS_ALLOW_HEADERS = (
    b"authorization, content-type, accept, mcp-protocol-version, mcp-session-id, mcp-method, "
    b"mcp-name, last-event-id"
)
CORS_EXPOSE_HEADERS = b"mcp-session-id, www-authenticate"


def with_cors(send, origin: str):
    """`send` adding the headers that let a browser on `origin` (allowed) read the answer."""

    async def send_with_cors(message) -> None:
        if message["type"] == "http.response.start":
            headers = [
                *message.get("headers", []),
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-expose-headers", CORS_EXPOSE_HEADERS),
                (b"vary", b"Origin"),
            ]
            message = {**message, "headers": headers}
        await send(message)

    return send_with_cors


async def send_preflight(send) -> None:
    """The answer to a CORS preflight (no credentials: it comes before the key is sent)."""
    headers = [
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", CORS_ALLOW_HEADERS),
        (b"access-control-max-age", b"600"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def retry_after(seconds: int) -> tuple[bytes, bytes]:
    return (b"retry-after", str(seconds).encode())


class TooLarge(Exception):
    pass


async def read_body(receive, limit: int) -> bytes:
    """The whole request body; TooLarge past `limit` bytes (read no further)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: the SDK sees an empty body
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replaying(body: bytes, receive):
    """A `receive` that gives `body` first, then what the client sends (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again():
        return pending.pop() if pending else await receive()

    return receive_again


async def checked_body(scope, receive, send):
    """For a POST: the `receive` to hand on once its body is JSON within
    DATA_UPLOAD_MAX_MEMORY_SIZE, or None once refused in our error shape (the SDK would answer
    text/plain): 415 `unsupported_media_type`, 413 `too_large`."""
    content_type = (header_of(scope, b"content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        body = error_body(
            "Send the JSON-RPC message as application/json.", "unsupported_media_type"
        )
        await send_json(send, 415, body)
        return None
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = header_of(scope, b"content-length")
    try:
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise TooLarge
        body = await read_body(receive, limit)
    except TooLarge:
        message = f"The request body is over {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
        await send_json(send, 413, error_body(message, "too_large"))
        return None
    return replaying(body, receive)


class McpHttpApp:
    """ASGI app for /mcp: checks host, origin, body and key of every request, then hands over.

    Refusals answer our error shape; the key is also the SDK's authenticated user, so a
    stateful session can only be continued with the key that opened it.
    """

    def __init__(self, *, json_response: bool = True, stateless: bool | None = None):
        self.server = build_server()
        # Stateless (MCP_STATELESS, the default): no session lives in one process's memory, so
        # any worker of `config.serve` answers any request; each request is checked by its key.
        if stateless is None:
            stateless = settings.MCP_STATELESS
        self.stateless = stateless
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=json_response,
            stateless=stateless,
            max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
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
        origin = header_of(scope, b"origin")
        if origin is not None:  # allowed (refusal_of): a browser host such as the Inspector
            send = with_cors(send, origin)
            if scope["method"] == "OPTIONS":
                await send_preflight(send)
                return
        if self._stack is None:
            # The session manager runs in the ASGI lifespan; a server started without one
            # (e.g. `uvicorn --lifespan off`) cannot serve MCP.
            message = "The MCP server is not running: serve the app with its ASGI lifespan on."
            await send_refusal(send, 503, message, "mcp_unavailable")
            return
        header = header_of(scope, b"authorization")
        plaintext = bearer_token(header) if header is not None else None
        address = (scope.get("client") or (None,))[0]
        admitted = await admit(plaintext, address)
        if admitted.locked_for is not None:
            message = locked_out_message(admitted.locked_for)
            headers = [retry_after(admitted.locked_for)]
            await send_refusal(send, 429, message, "authentication_throttled", headers)
            return
        challenge = [(b"www-authenticate", b'Bearer realm="mcp"')]
        if header is None:
            message = "Authentication required: send 'Authorization: Bearer <agent key>'."
            await send_refusal(send, 401, message, "authentication_required", challenge)
            return
        key, wait = admitted.key, admitted.wait
        if key is None:
            message = "Invalid or revoked API key."
            await send_refusal(send, 401, message, "authentication_failed", challenge)
            return
        if wait is not None:
            # API_THROTTLE_RATE is per key whatever the door: REST and /mcp share its counter.
            message = f"Request was throttled. Expected available in {wait} seconds."
            await send_refusal(send, 429, message, "rate_limited", [retry_after(wait)])
            return
        if self.stateless and scope["method"] == "GET":
            # The stream a GET opens carries what the server sends unasked, and a stateless
            # server has nothing to send on it: it would only hold a connection open forever.
            # The spec's answer for a server without that stream is 405 (after the key, as for
            # every request: a bad key is 401 whatever the method).
            message = "No server-sent stream here (MCP_STATELESS): POST requests."
            allow = [(b"allow", b"POST, DELETE, OPTIONS")]
            await send_refusal(send, 405, message, "method_not_allowed", allow)
            return
        if scope["method"] == "POST":
            receive = await checked_body(scope, receive, send)
            if receive is None:
                return
        token = AccessToken(token=plaintext, client_id=f"ao_{key.prefix}", scopes=[])
        scope = {**scope, SCOPE_KEY: key, "user": AuthenticatedUser(token)}
        await self.session_manager.handle_request(scope, receive, send)
