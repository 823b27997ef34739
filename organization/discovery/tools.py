"""The `discover_experts` tool (seed 002), served by REST call-tool and MCP."""

from ..caller import Caller
from ..registry import register_tool
from ..serializers import DiscoverQuerySerializer
from .experts import discover


@register_tool(
    "discover_experts",
    "List the experts that share your worktree (seed 002): agent_id, expert_id, name, role, "
    "worktree_path and status (idle/busy). Read-only.",
    DiscoverQuerySerializer,
    read_only=True,
)
def discover_experts(caller: Caller, params: dict) -> dict:
    return discover(caller=caller, agent_param=params.get("agent"))
