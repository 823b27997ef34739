"""Routes of expert discovery (seed 002), mounted under /api/."""

from django.urls import path

from . import api as discovery_api

urlpatterns = [
    path("experts", discovery_api.ExpertsView.as_view(), name="experts"),
    path("agents/me/status", discovery_api.AgentStatusView.as_view(), name="agent-status"),
    path(
        "agents/<str:agent_id>/discovery-prompt",
        discovery_api.DiscoveryPromptView.as_view(),
        name="agent-discovery-prompt",
    ),
]
