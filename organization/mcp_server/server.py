"""The MCP server: the registry's tools and the agent prompts, as seen by each request's caller.

The caller comes only from the API key: the one the /mcp gate checked, or the stdio `--key`.
"""

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from infrastructure import tracing
from infrastructure.throttling import address_locked_for, count_auth_failure, key_over_rate

from .. import registry
from ..auth import authenticate_key
from ..caller import Caller, caller_for_key
from ..models import ApiKey
from .prompts import AGENT_ARGUMENT, PROMPTS, get_prompt
from .tools import mcp_tool, run_tool

SERVER_NAME = "agent-org"
# Where the /mcp gate leaves the checked key in the ASGI scope for `caller_of_request`.
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


async def caller_of_request(ctx: ServerRequestContext) -> Caller:
    """HTTP: the caller the /mcp gate resolved for THIS request (each request is re-checked)."""
    request = ctx.request
    key = request.scope.get(SCOPE_KEY) if request is not None else None
    if key is None:
        raise McpAuthError("No API key on this request.")
    return traced(caller_for_key(key))


def traced(caller: Caller) -> Caller:
    """The caller, named on the request's span (the SDK's MCP server span)."""
    tracing.tag(organization=caller.organization, agent=caller.agent)
    return caller


def _find_key(plaintext: str) -> ApiKey | None:
    try:
        return authenticate_key(plaintext)
    finally:
        # As after an HTTP request: back to the pool (or kept for CONN_MAX_AGE, unless broken).
        close_old_connections()


# In the executor's threads, like the tool calls: no request waits for another's lookup.
find_key = sync_to_async(_find_key, thread_sensitive=False)


@dataclass(frozen=True)
class Admission:
    """What the /mcp gate learns of a request's key in one trip off the event loop."""

    key: ApiKey | None = None
    wait: int | None = None  # over API_THROTTLE_RATE: seconds to wait
    locked_for: int | None = None  # the address past AUTH_FAILURE_LIMIT: seconds to wait


def _admit(plaintext: str | None, address: str | None) -> Admission:
    """The key of `plaintext` and its rate (each /mcp request counts as a REST request does, in
    the same counter), unless the address is locked out; a missing or refused key counts as a
    failed authentication of the address, as a REST 401 does."""
    try:
        locked_for = address_locked_for(address)
        if locked_for is not None:
            return Admission(locked_for=locked_for)
        key = authenticate_key(plaintext) if plaintext is not None else None
        if key is None:
            count_auth_failure(address)
            return Admission()
        return Admission(key=key, wait=key_over_rate(key))
    finally:
        close_old_connections()


admit = sync_to_async(_admit, thread_sensitive=False)


# A JSON-RPC error of the server's own range: the key stdio was started with no longer holds.
KEY_REFUSED = -32001


def key_checked_caller(plaintext: str) -> CallerSource:
    """stdio: the caller of the key the process was started with, checked again on every
    request as /mcp's gate checks each HTTP one, so a revoked key (or a deleted agent) is
    refused at once, not when the host restarts the process."""

    async def source(ctx: ServerRequestContext) -> Caller:
        key = await find_key(plaintext)
        if key is None:
            raise MCPError(
                KEY_REFUSED,
                "Invalid or revoked API key.",
                {"code": "authentication_failed", "status": 401},
            )
        return traced(caller_for_key(key))

    return source


async def close_db_connections() -> None:
    """Close the connections of the thread MCP runs its database work in (tests, shutdown)."""
    await sync_to_async(connections.close_all, thread_sensitive=True)()


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
        return await run_tool(caller, params.name, params.arguments, ctx.request_id)

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
        return tool.offered_schema if tool is not None else None

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


# --- stdio ---------------------------------------------------------------------------


def stdio_configuration_problem() -> str | None:
    """Why this process cannot serve as the service would, or None.

    On PostgreSQL without REDIS_URL, work it queued would wait in a broker no worker reads.
    """
    explicit_broker = os.environ.get("CELERY_BROKER_URL", "").strip()
    if connections["default"].vendor == "sqlite" or explicit_broker:
        return None
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        return (
            "REDIS_URL is not set: work this server queues would wait in VAR_DIR's filesystem "
            "broker, which the service's workers do not read. Pass the service's REDIS_URL "
            "(and its DATABASE_URL and SECRET_KEY) in the host's env (docs/clients.md)."
        )
    return None


async def serve_stdio(plaintext: str) -> None:
    """Serve MCP on stdin/stdout as the key's caller until the host closes the pipe."""
    from mcp.server.stdio import stdio_server

    server = build_server(key_checked_caller(plaintext))
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await close_db_connections()
