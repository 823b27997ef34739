"""The /a2a door: public cards, then the bearer key of every other request, then the SDK's
JSON-RPC and HTTP+JSON routes of one agent. Routed to by config/asgi.py."""

import hashlib

from a2a.auth.user import User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import ServerCallContextBuilder
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from infrastructure.errors import DomainError, error_body
from infrastructure.throttling import locked_out_message
from organization.auth import bearer_token
from organization.caller import Caller, caller_for_key
from organization.mcp_server.gate import TooLarge, header_of, read_body, replaying
from organization.mcp_server.server import admit

from . import cards, conformance, work
from .handler import OrganizationRequestHandler
from .tracing import traced

A2A_PREFIX = "/a2a/"
CARD_PATH = "/.well-known/agent-card.json"
DIRECTORY_PATH = "/.well-known/agent-cards.json"
# Seconds a card may be reused: short, for its availability extension.
CARD_MAX_AGE = 30


class CallerUser(User):
    def __init__(self, caller: Caller):
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.caller.label


class CallerContextBuilder(ServerCallContextBuilder):
    """The call's context: the caller and the agent the gate found (`request.state`)."""

    def build(self, request: Request) -> ServerCallContext:
        caller = request.state.caller
        return ServerCallContext(
            user=CallerUser(caller),
            # The SDK reads the A2A-Version header from the state's headers.
            state={
                "caller": caller,
                "agent": request.state.agent,
                "conformance": getattr(request.state, "conformance", False),
                "headers": dict(request.headers),
            },
            requested_extensions=get_requested_extensions(
                request.headers.getlist(HTTP_EXTENSION_HEADER)
            ),
        )


def read(function, *args):
    try:
        return function(*args)
    finally:
        close_old_connections()


read_off_loop = sync_to_async(read, thread_sensitive=False)


def refused(exc: DomainError, status: int) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.code), status_code=status)


def site_of(request: Request) -> str | None:
    """Where the cards' URLs point: PUBLIC_BASE_URL, else the request's own address when its
    Host is one of ALLOWED_HOSTS (as Django checks it); None for any other Host."""
    if settings.PUBLIC_BASE_URL:
        return settings.PUBLIC_BASE_URL
    domain, _ = split_domain_port(request.headers.get("host", ""))
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return str(request.base_url).rstrip("/")


async def serve_card(request: Request, read_card, *args) -> JSONResponse:
    site = site_of(request)
    if site is None:
        return JSONResponse(
            error_body("This Host is not allowed (ALLOWED_HOSTS).", "disallowed_host"),
            status_code=400,
        )
    try:
        found = await read_off_loop(read_card, *args, site)
    except DomainError as exc:
        return refused(exc, 404)
    return cached(request, JSONResponse(found))


def cached(request: Request, response: JSONResponse) -> Response:
    """A card with its validator (ETag) and a short freshness: it carries live availability.
    A request that holds the same card already is 304."""
    etag = f'"{hashlib.sha256(response.body).hexdigest()[:32]}"'
    headers = {"ETag": etag, "Cache-Control": f"public, max-age={CARD_MAX_AGE}"}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return response


async def agent_card(request: Request) -> JSONResponse:
    params = request.path_params
    return await serve_card(request, cards.card_json, params["org"], params["agent"])


async def directory(request: Request) -> JSONResponse:
    return await serve_card(request, cards.directory_json, request.path_params["org"])


def agent_named(caller: Caller, org_slug: str, handle: str):
    try:
        return work.agent_of(caller, org_slug, handle)
    finally:
        close_old_connections()


find_agent = sync_to_async(agent_named, thread_sensitive=False)


def refusal(status: int, message: str, code: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, code), status_code=status, headers=headers)


async def bounded(scope, receive) -> tuple:
    """The request's body read first, at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes as at every
    other door: the `receive` that replays it, or a 413 `too_large` to answer."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = header_of(scope, b"content-length")
    try:
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise TooLarge
        return replaying(await read_body(receive, limit), receive), None
    except TooLarge:
        message = f"The request body is over {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
        return receive, refusal(413, message, "too_large")


def is_public(path: str) -> bool:
    return path.endswith(CARD_PATH) or path.endswith(DIRECTORY_PATH)


class A2AApp:
    """Every agent's A2A server under `/a2a/<org slug>/<agent id>/`."""

    def __init__(self):
        handler = traced(OrganizationRequestHandler)()
        builder = CallerContextBuilder()
        agent_routes = [
            Route(CARD_PATH, agent_card, methods=["GET"]),
            # Both also take protocol 0.3 (its method names and /v1/ paths) for 0.3 clients.
            *create_jsonrpc_routes(handler, "/", context_builder=builder, enable_v0_3_compat=True),
            *create_rest_routes(handler, context_builder=builder, enable_v0_3_compat=True),
        ]
        self.routes = Starlette(
            routes=[
                Route("/a2a/{org}" + DIRECTORY_PATH, directory, methods=["GET"]),
                Mount("/a2a/{org}/{agent}", routes=agent_routes),
            ]
        )

    async def __call__(self, scope, receive, send) -> None:
        if scope["path"].split("/")[2] == conformance.ORG_SLUG:
            response = await self.conformance_gate(scope)
        elif not is_public(scope["path"]):
            response = await self.gate(scope)
        else:
            response = None
        if response is None and scope["method"] != "GET":
            receive, response = await bounded(scope, receive)
        if response is not None:
            await response(scope, receive, send)
            return
        await self.routes(scope, receive, send)

    async def conformance_gate(self, scope) -> JSONResponse | None:
        """The conformance kit's agent: no key, only with A2A_CONFORMANCE (404 otherwise)."""
        parts = scope["path"].split("/")
        if not settings.A2A_CONFORMANCE:
            return refusal(404, "Not found.", "not_found")
        caller, agent = await read_off_loop(conformance.members)
        if is_public(scope["path"]):
            return None
        if len(parts) < 4 or parts[3] != agent.handle:
            return refusal(
                404, f"Agent not found: {parts[3] if len(parts) > 3 else ''}", "agent_not_found"
            )
        scope.setdefault("state", {}).update(caller=caller, agent=agent, conformance=True)
        return None

    async def gate(self, scope) -> JSONResponse | None:
        """The key, as /mcp's gate checks it (the address's failures, the key's rate, shared with
        REST and /mcp), then the agent; a refusal's response, or None to go on."""
        parts = scope["path"].split("/")
        if len(parts) < 4 or not parts[2] or not parts[3]:
            return refusal(404, "Not found.", "not_found")
        header = Request(scope).headers.get("authorization")
        plaintext = bearer_token(header) if header is not None else None
        admitted = await admit(plaintext, (scope.get("client") or (None,))[0])
        if admitted.locked_for is not None:
            wait = {"Retry-After": str(admitted.locked_for)}
            return refusal(
                429, locked_out_message(admitted.locked_for), "authentication_throttled", wait
            )
        if admitted.key is None:
            challenge = {"WWW-Authenticate": 'Bearer realm="a2a"'}
            if header is None:
                message = "Authentication required: send 'Authorization: Bearer <API key>'."
                return refusal(401, message, "authentication_required", challenge)
            return refusal(401, "Invalid or revoked API key.", "authentication_failed", challenge)
        if admitted.wait is not None:
            message = f"Request was throttled. Expected available in {admitted.wait} seconds."
            return refusal(429, message, "rate_limited", {"Retry-After": str(admitted.wait)})
        caller = caller_for_key(admitted.key)
        try:
            agent = await find_agent(caller, parts[2], parts[3])
        except DomainError as exc:
            return refused(exc, 404)
        scope.setdefault("state", {}).update(caller=caller, agent=agent)
        return None
