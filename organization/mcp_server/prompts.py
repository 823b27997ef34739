"""The prompts an agent is launched with, over MCP: its system prompt (seed 001) and its
expert-discovery subagent prompt (seed 002)."""

from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from infrastructure.errors import DomainError, NotFound
from infrastructure.inputs import check_input

from ..caller import Caller
from ..discovery.prompt import discovery_prompt_for
from ..models import Agent
from ..prompt import system_prompt_for
from ..tools import visible_prompt_subject
from .errors import status_body


@dataclass(frozen=True)
class McpPrompt:
    name: str
    description: str
    render: Callable[[Agent], str | None]


def _system_prompt(agent: Agent) -> str:
    return system_prompt_for(agent)


def _discovery_prompt(agent: Agent) -> str | None:
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


get_prompt = sync_to_async(_get_prompt, thread_sensitive=False)
