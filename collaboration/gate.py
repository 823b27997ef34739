"""The approval gate of a start: a session estimated above a `collaboration_cost` policy's
`cost_above_usd` waits for a human instead of starting (docs/decisions.md)."""

from __future__ import annotations

from organization import registry
from organization.caller import Caller
from tasks.rules import Actor, GateClosed, check_cost_policies, gate_applies
from tasks.services.decisions import decision_request
from tasks.services.gate import AwaitingApproval

from .estimate import estimate
from .serializers.start import validated_start
from .spec import StartSpec

START_TOOL = "start_collaboration"


def check_start_cost(caller: Caller, arguments: dict, spec: StartSpec | None = None) -> None:
    """Raise AwaitingApproval (202) when a policy holds this start; `arguments` are the start's
    params as sent, kept as the decision's move."""
    org = caller.organization
    if not gate_applies(org):
        return
    spec = spec or validated_start(arguments, caller=caller)
    cost = estimate(spec, org, starter_agent_id=caller.agent_id)["estimated_cost_usd"]
    try:
        check_cost_policies(org=org, agent=caller.agent, cost=cost)
    except GateClosed as closed:
        decision = decision_request(
            org=org,
            actor=Actor.of(caller),
            policy=closed.policy,
            action={"name": START_TOOL, "arguments": arguments},
            task_id=None,
            reason=closed.reason,
        )
        raise AwaitingApproval(decision) from None


def start_gate(caller: Caller, tool: registry.Tool, params: dict) -> None:
    """The registry's gate for a start by a tool call (call-tool, MCP, a managed run)."""
    if tool.name == START_TOOL:
        check_start_cost(caller, params)
