import django_filters

from .models import CollaborationSession, Mode, SessionStatus


class SessionFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=SessionStatus.choices)
    mode = django_filters.ChoiceFilter(choices=Mode.choices)
    created_by = django_filters.CharFilter(
        field_name="created_by", help_text="An agent id, `user:<name>` or `org-key:<prefix>`."
    )

    class Meta:
        model = CollaborationSession
        fields = ["status", "mode", "created_by"]
