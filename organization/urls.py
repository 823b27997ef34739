from django.urls import path

from . import api

urlpatterns = [
    path("roster", api.RosterView.as_view(), name="roster"),
    path("agent-engine/call-tool", api.CallToolView.as_view(), name="call-tool"),
    path("tools", api.ToolListView.as_view(), name="tools"),
]
