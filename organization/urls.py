from django.urls import path

from . import api

urlpatterns = [
    path("roster", api.RosterView.as_view(), name="roster"),
    path("agent-engine/call-tool", api.CallToolView.as_view(), name="call-tool"),
    path("tools", api.ToolListView.as_view(), name="tools"),
    path("agents", api.AgentViewSet.as_view({"get": "list"}), name="agent-list"),
    path("agents/me/availability", api.AvailabilityView.as_view(), name="agent-availability"),
    path(
        "agents/<str:agent_id>", api.AgentViewSet.as_view({"get": "retrieve"}), name="agent-detail"
    ),
    path(
        "agents/<str:agent_id>/system-prompt",
        api.SystemPromptView.as_view(),
        name="agent-system-prompt",
    ),
    path("teams", api.TeamViewSet.as_view({"get": "list"}), name="team-list"),
    path("team/roles", api.TeamRolesView.as_view(), name="team-roles"),
    path("team/roles/<str:agent_id>", api.TeamRoleDetailView.as_view(), name="team-role"),
    path(
        "team/roles/<str:agent_id>/delete",
        api.TeamRoleDeleteView.as_view(),
        name="team-role-delete",
    ),
    path("team/rules", api.TeamRulesView.as_view(), name="team-rules"),
    path("team/summary", api.TeamSummaryView.as_view(), name="team-summary"),
    path("audit", api.AuditView.as_view(), name="audit"),
]
