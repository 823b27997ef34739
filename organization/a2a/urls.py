"""Routes of the A2A agent cards, mounted under /api/."""

from django.urls import path

from . import api

urlpatterns = [
    path("agents/<str:agent_id>/card", api.AgentCardView.as_view(), name="agent-card"),
    path("agent-cards", api.AgentCardIndexView.as_view(), name="agent-cards"),
]
