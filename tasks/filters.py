import django_filters

from infrastructure.inputs import BIGINT_MAX
from organization.filters import IdFilter

from .models import DecisionKind, DecisionStatus, HumanDecision, Task, TaskStatus, Urgency


class TaskFilter(django_filters.FilterSet):
    """GET /api/tasks filters; agents named by handle (`expertise`, `created_by`: docs/design.md)."""

    status = django_filters.ChoiceFilter(choices=TaskStatus.choices)
    urgency = django_filters.ChoiceFilter(choices=Urgency.choices)
    assignee = django_filters.CharFilter(field_name="assignee__handle")
    queued_for = django_filters.CharFilter(field_name="queued_for__handle")
    created_by_agent = django_filters.CharFilter(field_name="created_by_agent__handle")
    created_by = django_filters.CharFilter(field_name="created_by_agent__handle")
    required_expertise = django_filters.CharFilter()
    expertise = django_filters.CharFilter(field_name="required_expertise")
    parent = IdFilter(
        field_name="parent_id",
        min_value=1,
        max_value=BIGINT_MAX,
        help_text="Only the subtasks of this task (its id).",
    )

    class Meta:
        model = Task
        fields = [
            "status",
            "urgency",
            "assignee",
            "queued_for",
            "created_by_agent",
            "created_by",
            "required_expertise",
            "expertise",
            "parent",
        ]


class DecisionFilter(django_filters.FilterSet):
    """GET /api/decisions filters."""

    status = django_filters.ChoiceFilter(choices=DecisionStatus.choices)
    kind = django_filters.ChoiceFilter(choices=DecisionKind.choices)
    task = IdFilter(
        field_name="task_id", min_value=1, max_value=BIGINT_MAX, help_text="Decisions on this task."
    )

    class Meta:
        model = HumanDecision
        fields = ["status", "kind", "task"]
