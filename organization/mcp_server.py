"""The MCP server: the tool registry served over MCP (streamable HTTP at /mcp, and stdio).

One source of truth: `tools/list` is `registry.tools_for(caller)` and `tools/call` is
`registry.call_tool(caller, ...)`, so a tool registered by any app appears here with the
same name, description and input schema as on REST call-tool. Who calls comes only from
the API key: the `Authorization: Bearer` header of each HTTP request, or `--key` for stdio.

Two prompts are served as well: the agent's system prompt (seed 001) and its expert-discovery
subagent prompt (seed 002). A result is the tool's JSON (as REST renders it) in one text block. Domain errors never
crash a session: they come back as MCP tool errors (`isError`) whose text is our error body
`{"success": false, "error", "code", "status"}`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from rest_framework.utils.encoders import JSONEncoder

from . import registry
from .auth import authenticate_key
from .caller import Caller
from .errors import DomainError, NotFound, error_body, exception_handler
from .inputs import check_input
from .models import Agent, ApiKey
from .tools import visible_prompt_subject

logger = logging.getLogger(__name__)

SERVER_NAME = "agent-org"
MCP_PATH = "/mcp"
SCOPE_KEY = "agent_org.api_key"
INSTRUCTIONS = (
    "Agent Org: an organization for AI agents. You act as the agent of your API key. "
    "Read your colleagues with get_organization_roster, find same-worktree experts with "
    "discover_experts, and route work with the task tools. Errors carry a machine 'code'."
)

CallerSource = Callable[[ServerRequestContext], Awaitable[Caller]]


class McpAuthError(Exception):
    """No caller could be resolved for an MCP request (never reached through /mcp's gate)."""


# --- callers -------------------------------------------------------------------------


def caller_from_key(key: ApiKey) -> Caller:
    return Caller(organization=key.organization, agent=key.agent, api_key=key)


def active_key(plaintext: str) -> ApiKey | None:
    """The active key for `plaintext` (REST's own check: organization and last use included)."""
    return authenticate_key(plaintext)


async def caller_of_request(ctx: ServerRequestContext) -> Caller:
    """HTTP: the caller the /mcp gate resolved for THIS request (each request is re-checked)."""
    request = ctx.request
    key = request.scope.get(SCOPE_KEY) if request is not None else None
    if key is None:
        raise McpAuthError("No API key on this request.")
    return caller_from_key(key)


def fixed_caller(caller: Caller) -> CallerSource:
    """stdio: the one caller of the key the process was started with."""

    async def source(ctx: ServerRequestContext) -> Caller:
        return caller

    return source


# --- results -------------------------------------------------------------------------


def to_json_text(value: Any) -> str:
    """What REST would render for `value` (datetimes as ISO 8601, Decimals, UUIDs …)."""
    return json.dumps(value, cls=JSONEncoder, ensure_ascii=False, separators=(",", ":"))


def tool_result(value: Any) -> types.CallToolResult:
    """The tool's JSON as one text block: what an LLM host reads, and what a program parses.

    No `structuredContent` copy: the tools declare no output schema, and validating a large
    nested copy on both ends cost more than the whole REST request (bench/mcp.py).
    """
    return types.CallToolResult(content=[types.TextContent(type="text", text=to_json_text(value))])


def status_body(message: str, code: str, status: int) -> dict:
    """Our error body plus its HTTP status: what a tool or prompt error carries over MCP."""
    return {**error_body(message, code), "status": status}


def tool_error(message: str, code: str, status: int) -> types.CallToolResult:
    body = status_body(message, code, status)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=to_json_text(body))], is_error=True
    )


def error_for(exc: Exception) -> types.CallToolResult:
    """Our one error shape for anything a tool raised: REST's own exception handler shapes it."""
    response = exception_handler(exc, {})
    if response is not None:
        return tool_error(response.data["error"], response.data["code"], response.status_code)
    logger.exception("MCP tool call failed", exc_info=exc)
    return tool_error("The tool failed unexpectedly; the error was logged.", "server_error", 500)


def mcp_tool(tool: registry.Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations.model_validate(tool.annotations()),
    )


# --- database work, off the event loop ----------------------------------------------


def _run_tool(caller: Caller, name: str, arguments: dict | None) -> types.CallToolResult:
    try:
        return tool_result(registry.call_tool(caller, name, arguments))
    except Exception as exc:  # every failure becomes a tool error, never a dead session
        return error_for(exc)
    finally:
        # Django closes connections at the end of each HTTP request; MCP calls do it here,
        # so CONN_MAX_AGE is honoured and a broken connection is not reused.
        close_old_connections()


def _find_key(plaintext: str) -> ApiKey | None:
    # The connection stays open for the tool call that usually follows (one connect per call);
    # a failed lookup drops it, so a broken connection is not handed to the next request.
    try:
        return active_key(plaintext)
    except Exception:
        close_old_connections()
        raise


# thread_sensitive: all MCP database work runs in asgiref's one shared sync thread, in order.
run_tool = sync_to_async(_run_tool, thread_sensitive=True)
find_key = sync_to_async(_find_key, thread_sensitive=True)


async def close_db_connections() -> None:
    """Close the connections of the thread MCP runs its database work in (tests, shutdown)."""
    await sync_to_async(connections.close_all, thread_sensitive=True)()


# --- prompts: the texts an agent is launched with ---------------------------------


@dataclass(frozen=True)
class McpPrompt:
    name: str
    description: str
    render: Callable[[Agent], str | None]


def _system_prompt(agent: Agent) -> str:
    from .prompt import system_prompt_for

    return system_prompt_for(agent)


def _discovery_prompt(agent: Agent) -> str | None:
    from .discovery import discovery_prompt_for

    subagent = discovery_prompt_for(agent)["agents"].get("expert-discovery")
    return subagent["prompt"] if subagent else None


PROMPTS = {
    p.name: p
    for p in (
        McpPrompt(
            "system_prompt",
            "Your full system prompt: your custom prompt plus your organizational context "
            "(seed 001), fresh.",
            _system_prompt,
        ),
        McpPrompt(
            "expert_discovery",
            "The expert-discovery subagent prompt (seed 002): where the expert manifest and "
            "status files are, and how to read them without writing.",
            _discovery_prompt,
        ),
    )
}
AGENT_ARGUMENT = types.PromptArgument(
    name="agent", description="Organization keys only: whose prompt (an agent id).", required=False
)


def _get_prompt(caller: Caller, name: str, arguments: dict | None) -> types.GetPromptResult:
    """A prompt as the caller may see it: an agent its own, an organization key any agent's."""
    try:
        check_input(arguments or {}, "arguments")  # the one guard every door uses
        prompt = PROMPTS.get(name)
        if prompt is None:
            raise NotFound(f"Unknown prompt: {name}", "unknown_prompt")
        # The same visibility as get_my_context and REST: an agent its own, a key any.
        agent = visible_prompt_subject(caller, (arguments or {}).get("agent") or None)
        text = prompt.render(agent)
        if text is None:
            raise NotFound(f"Prompt not available: {name}", "prompt_unavailable")
    except DomainError as exc:
        body = status_body(exc.message, exc.code, exc.status)
        raise MCPError(INVALID_PARAMS, exc.message, body) from None
    finally:
        close_old_connections()
    return types.GetPromptResult(
        description=prompt.description,
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
    )


get_prompt = sync_to_async(_get_prompt, thread_sensitive=True)


# --- the server ----------------------------------------------------------------------


def build_server(caller_source: CallerSource = caller_of_request) -> Server:
    """A low-level MCP server whose tools are the registry's, as seen by each request's caller."""

    async def list_tools(ctx: ServerRequestContext, params) -> types.ListToolsResult:
        caller = await caller_source(ctx)
        return types.ListToolsResult(tools=[mcp_tool(t) for t in registry.tools_for(caller)])

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = await caller_source(ctx)
        return await run_tool(caller, params.name, params.arguments)

    async def list_prompts(ctx: ServerRequestContext, params) -> types.ListPromptsResult:
        caller = await caller_source(ctx)
        arguments = [] if caller.agent is not None else [AGENT_ARGUMENT]
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=p.name, description=p.description, arguments=arguments)
                for p in PROMPTS.values()
            ]
        )

    async def prompt(
        ctx: ServerRequestContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        caller = await caller_source(ctx)
        return await get_prompt(caller, params.name, params.arguments)

    def input_schema_of(name: str) -> dict | None:
        # Lets the SDK check Mcp-Param headers without running tools/list on every call.
        tool = registry.REGISTRY.get(name)
        return tool.input_schema if tool is not None else None

    return Server(
        SERVER_NAME,
        get_tool_input_schema=input_schema_of,
        version="0.1.0",
        title="Agent Org",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=prompt,
    )


# --- streamable HTTP at /mcp ---------------------------------------------------------


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


def bearer_of(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            parts = value.decode("latin-1").split()
            if len(parts) == 2 and parts[0].lower() == "bearer":
                return parts[1]
            return ""
    return None


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
    also handed to the SDK as its authenticated user, so a stateful MCP session can only be
    continued with the key that opened it.
    """

    def __init__(self, *, json_response: bool = True):
        self.server = build_server()
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server, json_response=json_response
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
        plaintext = bearer_of(scope)
        challenge = [(b"www-authenticate", b'Bearer realm="mcp"')]
        if plaintext is None:
            body = error_body(
                "Authentication required: send 'Authorization: Bearer <agent key>'.",
                "authentication_required",
            )
            await send_json(send, 401, body, challenge)
            return
        key = await find_key(plaintext)
        if key is None:
            body = error_body("Invalid or revoked API key.", "authentication_failed")
            await send_json(send, 401, body, challenge)
            return
        token = AccessToken(token=plaintext, client_id=f"ao_{key.prefix}", scopes=[])
        scope = {**scope, SCOPE_KEY: key, "user": AuthenticatedUser(token)}
        await self.session_manager.handle_request(scope, receive, send)


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
        from django.core.asgi import get_asgi_application

        django_app = get_asgi_application()
    return AgentOrgASGI(django_app, McpHttpApp())


# --- stdio ---------------------------------------------------------------------------


async def serve_stdio(key: ApiKey) -> None:
    """Serve MCP on stdin/stdout as the key's caller until the host closes the pipe."""
    from mcp.server.stdio import stdio_server

    server = build_server(fixed_caller(caller_from_key(key)))
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await close_db_connections()
