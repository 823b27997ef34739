"""A validated collaboration start: what StartCollaborationSerializer hands the services."""

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass
class AgentSpec:
    key: str
    display_name: str
    role: str
    focus: str
    config: dict
    agent: object = None  # organization.models.Agent for an org agent


@dataclass
class StartSpec:
    task: str
    agents: list[AgentSpec]
    mode: str
    synthesis: str
    coordinator_config: dict
    context: dict
    max_parallel: int
    agent_timeout: float
    max_total_tokens: int
    # A lifetime budget of the session's own, in USD; None: only the others apply.
    max_cost_usd: Decimal | None = None
    extra: dict = field(default_factory=dict)
