"""The team page: its name and how many agents it holds."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from ..models import Agent, Team
from ..workload import count_of
from .forms import OrgUniqueNameForm
from .scoping import OrgOwnedAdmin, sees_several_organizations


class TeamForm(OrgUniqueNameForm):
    class Meta:
        model = Team
        fields = ["organization", "name"]


@admin.register(Team)
class TeamAdmin(OrgOwnedAdmin):
    form = TeamForm
    list_display = ["name", "agent_count"]
    search_fields = ["name"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(agent_total=count_of(Agent.objects.all(), "team"))
        )

    def get_list_display(self, request):
        if sees_several_organizations(request):
            return ["name", "organization", "agent_count"]
        return self.list_display

    def get_list_select_related(self, request):
        return ["organization"]

    @admin.display(description="agents", ordering="agent_total")
    def agent_count(self, team):
        url = reverse("admin:organization_agent_changelist")
        return format_html('<a href="{}?team__id__exact={}">{}</a>', url, team.pk, team.agent_total)
