"""What a tool or prompt answers over MCP when it fails: our error body, never a dead session.

A domain error comes back as an MCP tool error (`isError`) whose text is our error body
`{"success": false, "error", "code", "status"}`, shaped by REST's own exception handler.
"""

import logging
from typing import Any

import mcp_types as types

from infrastructure.errors import error_body, exception_handler
from infrastructure.renderers import json_bytes

logger = logging.getLogger(__name__)


def to_json_text(value: Any) -> str:
    """What REST would render for `value` (datetimes as ISO 8601, Decimals, UUIDs …)."""
    return json_bytes(value).decode()


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
