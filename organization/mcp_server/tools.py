"""The registry's tools over MCP: `tools/list` and `tools/call` are the registry's, so every
tool has the same name, description and input schema as on REST call-tool; a result is the
tool's JSON in one text block.
"""

from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections

from .. import registry
from ..caller import Caller
from .errors import error_for, to_json_text


def tool_result(value: Any) -> types.CallToolResult:
    """The tool's JSON as one text block: what an LLM host reads, and what a program parses.

    No `structuredContent` copy: the tools declare no output schema, and validating a large
    nested copy on both ends is dear (bench/mcp.py).
    """
    return types.CallToolResult(content=[types.TextContent(type="text", text=to_json_text(value))])


def mcp_tool(tool: registry.Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.offered_schema,
        annotations=types.ToolAnnotations.model_validate(tool.annotations()),
    )


# --- database work, off the event loop ----------------------------------------------


def _run_tool(
    caller: Caller, name: str, arguments: dict | None, call_id=None
) -> types.CallToolResult:
    try:
        return tool_result(registry.call_tool(caller, name, arguments, call_id=call_id))
    except Exception as exc:  # every failure becomes a tool error, never a dead session
        return error_for(exc)
    finally:
        # Django closes connections at the end of each HTTP request; MCP calls do it here,
        # so CONN_MAX_AGE is honoured and a broken connection is not reused.
        close_old_connections()


# Not thread_sensitive: concurrent calls run side by side in the executor's threads (each with
# its own connection from the pool), not one after another in asgiref's one shared thread.
run_tool = sync_to_async(_run_tool, thread_sensitive=False)
