"""The organization's models by concern, re-exported: `from organization.models import Agent`."""

from .agents import (
    ALLOWED_TOOLS_MAX_ITEMS,
    DEFAULT_MAX_TURNS,
    HANDLE_VALIDATOR,
    MAX_TURNS_LIMIT,
    Agent,
    AgentRuntime,
    AgentStatus,
    former_handle_message,
    handle_is_fixed_message,
    handle_of_former_agent,
    named_in_delegation_chain,
    validate_allowed_tools,
)
from .expertise import (
    EXPERTISE_ITEM_MAX_LENGTH,
    EXPERTISE_MAX_ITEMS,
    ExpertiseGroup,
    validate_expertise,
)
from .hierarchy import (
    STALE_AFTER_MAX,
    STALE_AFTER_MIN,
    STALE_AFTER_VALIDATORS,
    AgentRole,
    HierarchyRole,
    TeamRule,
)
from .keys import ApiKey, IdempotencyKey, key_revoked
from .organizations import Membership, Organization, Team, new_webhook_secret

__all__ = [
    "ALLOWED_TOOLS_MAX_ITEMS",
    "DEFAULT_MAX_TURNS",
    "EXPERTISE_ITEM_MAX_LENGTH",
    "EXPERTISE_MAX_ITEMS",
    "HANDLE_VALIDATOR",
    "MAX_TURNS_LIMIT",
    "STALE_AFTER_MAX",
    "STALE_AFTER_MIN",
    "STALE_AFTER_VALIDATORS",
    "Agent",
    "AgentRole",
    "AgentRuntime",
    "AgentStatus",
    "ApiKey",
    "ExpertiseGroup",
    "HierarchyRole",
    "IdempotencyKey",
    "Membership",
    "Organization",
    "Team",
    "TeamRule",
    "former_handle_message",
    "handle_is_fixed_message",
    "handle_of_former_agent",
    "key_revoked",
    "named_in_delegation_chain",
    "new_webhook_secret",
    "validate_allowed_tools",
    "validate_expertise",
]
