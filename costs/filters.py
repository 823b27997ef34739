import django_filters

from infrastructure.inputs import BIGINT_MAX
from organization.filters import IdFilter

from .models import UsagePurpose, UsageRecord, UsageState


class UsageFilter(django_filters.FilterSet):
    """GET /api/usage filters."""

    agent = django_filters.CharFilter(field_name="agent__handle", help_text="An agent's id.")
    purpose = django_filters.ChoiceFilter(choices=UsagePurpose.choices)
    state = django_filters.ChoiceFilter(choices=UsageState.choices)
    session = django_filters.UUIDFilter(field_name="session_id", help_text="A collaboration.")
    run = IdFilter(field_name="run_id", min_value=1, max_value=BIGINT_MAX, help_text="A run.")
    task = IdFilter(field_name="task_id", min_value=1, max_value=BIGINT_MAX, help_text="A task.")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    self_reported = django_filters.BooleanFilter()

    class Meta:
        model = UsageRecord
        fields = ["agent", "purpose", "state", "session", "run", "task", "self_reported"]
