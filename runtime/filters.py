import django_filters
from django.db.models import Exists, OuterRef

from infrastructure.inputs import BIGINT_MAX
from organization.filters import IdFilter

from .models import TRIGGERS, Run, RunStatus, RunTrigger


class RunFilter(django_filters.FilterSet):
    """GET /api/runs filters; the agent by its id (handle)."""

    agent = django_filters.CharFilter(field_name="agent__handle", help_text="An agent's id.")
    task = IdFilter(
        method="filter_task",
        min_value=1,
        max_value=BIGINT_MAX,
        help_text="Runs woken for this task (its first task or any other it was woken for).",
    )
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = django_filters.ChoiceFilter(choices=[(t, t) for t in TRIGGERS])

    class Meta:
        model = Run
        fields = ["agent", "task", "status", "trigger"]

    def filter_task(self, queryset, name, value):
        woken = RunTrigger.objects.filter(run=OuterRef("pk"), task_id=value)
        return queryset.filter(Exists(woken))
