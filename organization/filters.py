"""django-filter filter sets of the read API (`GET /api/agents`), and the id filter of every
app's lists."""

import django_filters
from django import forms

from .models import Agent, AgentRuntime, AgentStatus, HierarchyRole
from .selectors import with_expertise
from .workload import AVAILABLE, with_status

NO_ROLE = "none"


class IdFilter(django_filters.Filter):
    """A database id: a whole number that fits a bigint (anything else is 400 invalid), typed
    `integer` in the OpenAPI schema (NumberFilter's `number` made generated clients send floats)."""

    field_class = forms.IntegerField


class AgentFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__name", help_text="Team name, exact.")
    status = django_filters.ChoiceFilter(
        choices=[*AgentStatus.choices, (AVAILABLE, "Available (idle or active)")],
        method="filter_status",
        help_text="Computed as in seed 000, relative to capacity (for 5: ≤2 idle, 3 active, "
        "≥4 busy); paused → offline; available = idle or active (seed 001).",
    )
    expertise = django_filters.CharFilter(
        method="filter_expertise", help_text="One expertise, exact and case-sensitive."
    )
    hierarchy_role = django_filters.ChoiceFilter(
        choices=[*HierarchyRole.choices, (NO_ROLE, "No role assigned")],
        method="filter_hierarchy_role",
    )
    runtime = django_filters.ChoiceFilter(
        choices=AgentRuntime.choices,
        help_text="external (it calls us), managed (we run it) or a2a (a remote A2A agent).",
    )

    class Meta:
        model = Agent
        fields = ["team", "status", "expertise", "hierarchy_role", "runtime"]

    def filter_status(self, qs, name, value):
        return with_status(qs, value)

    def filter_expertise(self, qs, name, value):
        return with_expertise(qs, value)

    # The hint types the parameter in the OpenAPI schema: a role name, not the model's FK id.
    def filter_hierarchy_role(self, qs, name, value: str):
        if value == NO_ROLE:
            return qs.filter(hierarchy_role__isnull=True)
        return qs.filter(hierarchy_role__role=value)
