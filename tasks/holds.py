"""Who a budget holds back: managed agents whose runs wait until the budget has room.

The costs app, above this one, registers the one function that knows (`register_budget_holds`).
"""

from collections.abc import Callable

from organization.models import Agent

# `function(agents) -> {agent id: why, in words}` for the agents a budget holds back.
BUDGET_HOLDS: list[Callable[[list[Agent]], dict[int, str]]] = []


def register_budget_holds(function: Callable[[list[Agent]], dict[int, str]]) -> None:
    BUDGET_HOLDS[:] = [function]


def budget_holds(agents: list[Agent]) -> dict[int, str]:
    """Why each of `agents` (managed ones only: the service runs them) is held for budget; no
    query when none is managed."""
    managed = [a for a in agents if a.is_managed]
    if not managed or not BUDGET_HOLDS:
        return {}
    return BUDGET_HOLDS[0](managed)
