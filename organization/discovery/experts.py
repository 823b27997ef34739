"""Seed 002's discovery: the experts that share the caller's `worktree_path` (null matches
only null), the caller excluded, with `idle` | `busy` — `GET /api/experts` and the
`discover_experts` tool.
"""

from infrastructure.errors import Forbidden

from ..caller import Caller
from ..models import Agent, Organization
from ..selectors import agent_by_handle, agents_of
from .manifest import MANIFEST_FIELDS, manifest_entry
from .status import runtime_status_of


def expert_view(agent: Agent, org: Organization) -> dict:
    runtime = runtime_status_of(agent, org)
    return {**manifest_entry(agent), "status": runtime.status}


def experts_for(*, org: Organization, agent: Agent | None) -> list[dict]:
    """The experts sharing `agent`'s worktree (null matches only null), `agent` excluded.

    `agent=None` (a human's view) lists every agent of the organization.
    """
    experts = agents_of(org=org).order_by("pk")
    if agent is not None:
        if agent.worktree_path is None:
            experts = experts.filter(worktree_path__isnull=True)
        else:
            experts = experts.filter(worktree_path=agent.worktree_path)
        experts = experts.exclude(pk=agent.pk)
    fields = ("pk", *MANIFEST_FIELDS, "runtime_status", "runtime_status_at")
    return [expert_view(a, org) for a in experts.only(*fields)]


def discover(*, caller: Caller, agent_param: str | None = None) -> dict:
    """`GET /api/experts` and `discover_experts`: whose view, and the experts in it."""
    agent = caller.agent
    if agent is None and agent_param:
        agent = agent_by_handle(org=caller.organization, handle=agent_param)
    elif agent is not None and agent_param and agent_param != agent.handle:
        raise Forbidden(
            "An agent discovers experts from its own worktree only.", "identity_mismatch"
        )
    return {
        "agent_id": agent.handle if agent else None,
        "expert_id": agent.pk if agent else None,
        "worktree_path": agent.worktree_path if agent else None,
        "experts": experts_for(org=caller.organization, agent=agent),
    }
