"""Routes of expert discovery (seed 002) and A2A agent cards, mounted under /api/."""

from django.urls import path

from . import discovery_api

urlpatterns = [
    path("experts", discovery_api.ExpertsView.as_view(), name="experts"),
    path("agents/me/status", discovery_api.AgentStatusView.as_view(), name="agent-status"),
    path(
        "agents/<str:agent_id>/discovery-prompt",
        discovery_api.DiscoveryPromptView.as_view(),
        name="agent-discovery-prompt",
    ),
    path("agents/<str:agent_id>/card", discovery_api.AgentCardView.as_view(), name="agent-card"),
    path("agent-cards", discovery_api.AgentCardIndexView.as_view(), name="agent-cards"),
]
