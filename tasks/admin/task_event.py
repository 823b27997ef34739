"""The audit trail: every event of every task, read-only."""

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from organization.admin.actors import key_name_of, label_words
from organization.admin.display import HumanChoicesFilter, human
from organization.admin.words import duration

from ..models import TaskEvent
from .base import AuditAdmin, OrganizationColumn, state_words


@admin.register(TaskEvent)
class TaskEventAdmin(OrganizationColumn, AuditAdmin):
    list_display = ["when", "task_title", "what", "by", "to", "decision_display"]
    list_display_links = ["when"]
    list_filter = [(f, HumanChoicesFilter) for f in ("kind", "actor_kind", "decision")]
    list_select_related = ["task", "recipient", "organization"]
    search_fields = ["task__title", "actor_label", "message"]
    ordering = ["-created_at", "-pk"]

    @admin.display(description="when", ordering="created_at")
    def when(self, event):
        local = timezone.localtime(event.created_at)
        return format_html(
            '<span title="{}">{}</span>', local.isoformat(), local.strftime("%b %d, %H:%M")
        )

    @admin.display(description="task", ordering="task__title")
    def task_title(self, event):
        title = event.task.title
        return title if len(title) <= 80 else title[:79] + "…"

    @admin.display(description="what", ordering="kind")
    def what(self, event):
        return human(event.kind)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(actor_key_name=key_name_of("actor_label"))

    # The event's page: the move in words, not the audit row's JSON snapshots.
    SAID_INSTEAD = {
        "before": "move",
        "after": None,
        "actor_label": "by",
        "wait_time_seconds": "estimated_wait",
    }

    def get_fields(self, request, obj=None):
        fields = [f.name for f in self.model._meta.fields]
        return [self.SAID_INSTEAD.get(f, f) for f in fields if self.SAID_INSTEAD.get(f, f)]

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "move", "by", "estimated_wait"]

    @admin.display(description="the task went")
    def move(self, event):
        return f"from {state_words(event.before)} to {state_words(event.after)}"

    @admin.display(description="estimated wait")
    def estimated_wait(self, event):
        return duration(event.wait_time_seconds) or "—"

    @admin.display(description="by", ordering="actor_label")
    def by(self, event):
        return label_words(event.actor_label, getattr(event, "actor_key_name", None))

    @admin.display(description="to", ordering="recipient__name")
    def to(self, event):
        if event.recipient_id is None:
            return ""
        return format_html(
            '<span title="{}">{}</span>', event.recipient.handle, event.recipient.name
        )

    @admin.display(description="decision", ordering="decision")
    def decision_display(self, event):
        return human(event.decision) if event.decision else ""
