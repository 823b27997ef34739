"""Serializers of the collaboration app: the start's input, a session's shapes, the estimate."""

from .estimate import EstimateBudgetSerializer, EstimateSerializer
from .sessions import (
    ContributionSerializer,
    ProgressSerializer,
    SessionEventSerializer,
    SessionIdSerializer,
    SessionListSerializer,
    SessionSerializer,
    progress_of,
)
from .start import (
    AgentConfigSerializer,
    AgentItemSerializer,
    LLMConfigSerializer,
    SeedProviderSerializer,
    SeedProviderSettingsSerializer,
    StartCollaborationSerializer,
    validated_start,
)

__all__ = [
    "AgentConfigSerializer",
    "AgentItemSerializer",
    "ContributionSerializer",
    "EstimateBudgetSerializer",
    "EstimateSerializer",
    "LLMConfigSerializer",
    "ProgressSerializer",
    "SeedProviderSerializer",
    "SeedProviderSettingsSerializer",
    "SessionEventSerializer",
    "SessionIdSerializer",
    "SessionListSerializer",
    "SessionSerializer",
    "StartCollaborationSerializer",
    "progress_of",
    "validated_start",
]
