"""Tasks in the admin: a product screen over the same services as the API.

Staff see only the organizations they administer, scoped by organization/admin.py's
`OrgScoped`/`OrgOwnedAdmin` (as every other admin page); superusers see all.
Assignments made here go through `services.task_create` / `task_assign`, so the rules of
DESIGN.md (capacity, offline, …) hold in the admin too; human-initiated moves bypass the role
checks exactly as over REST. The audit trail is read-only and cannot be deleted.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from organization import webhooks
from organization.admin import OrgOwnedAdmin, ReadOnlyInline
from organization.admin_views import admin_org_ids
from organization.errors import DomainError
from organization.models import Agent

from . import services
from .models import (
    URGENCY_RANK,
    ActorKind,
    DeliveryStatus,
    Task,
    TaskEvent,
    TaskStatus,
    WebhookDelivery,
)
from .rules import Actor

STATUS_COLOURS = {
    TaskStatus.QUEUED: "#6c757d",
    TaskStatus.ASSIGNED: "#0d6efd",
    TaskStatus.IN_PROGRESS: "#0dcaf0",
    TaskStatus.BLOCKED: "#fd7e14",
    TaskStatus.COMPLETED: "#198754",
    TaskStatus.FAILED: "#dc3545",
    TaskStatus.CANCELLED: "#adb5bd",
    TaskStatus.ESCALATED: "#d63384",
    DeliveryStatus.PENDING: "#6c757d",
    DeliveryStatus.DELIVERED: "#198754",
}


def badge(value: str):
    colour = STATUS_COLOURS.get(value, "#6c757d")
    return format_html(
        '<span style="background:{};color:#fff;padding:2px 6px;border-radius:8px">{}</span>',
        colour,
        value,
    )


def human_actor(request) -> Actor:
    return Actor(ActorKind.USER, f"user:{request.user.get_username()}", user=request.user)


class TasksAppAdmin(OrgOwnedAdmin):
    """Scoped like the organization's admins; nothing here is ever deleted (the audit trail)."""

    def has_delete_permission(self, request, obj=None):
        return False


class AuditAdmin(TasksAppAdmin):
    """Written only by the services: listed and shown, never added or changed."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class NeedsAttentionFilter(admin.SimpleListFilter):
    title = "attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        return [("needs", "Needs attention (escalated to humans)")]

    def queryset(self, request, queryset):
        if self.value() == "needs":
            return queryset.filter(status=TaskStatus.ESCALATED)
        return queryset


class TaskEventInline(ReadOnlyInline):
    """The audit trail under its task: append-only, written by the services alone."""

    model = TaskEvent
    fk_name = "task"
    parent_org_path = "organization"
    ordering = ["created_at", "pk"]
    fields = [
        "created_at", "kind", "actor_label", "recipient", "before", "after", "decision",
        "primary_choice", "reasoning", "wait_time_seconds", "coordination_note", "message",
    ]  # fmt: skip
    readonly_fields = fields


class TaskAdminForm(forms.ModelForm):
    """Editing metadata is plain; who holds the task changes only through the services."""

    assign_to = forms.ModelChoiceField(
        queryset=Agent.objects.none(),
        required=False,
        help_text="Assign (or reassign) through the engine: capacity and offline rules apply.",
    )

    class Meta:
        model = Task
        fields = [
            "organization",
            "title",
            "description",
            "required_expertise",
            "urgency",
            "deadline",
        ]

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request
        agents = Agent.objects.select_related("organization")
        ids = admin_org_ids(request) if request else None
        if ids is not None:
            agents = agents.filter(organization__in=ids)
        if self.instance.pk:
            # OrgOwnedAdmin shows a saved task's organization read-only.
            agents = agents.filter(organization_id=self.instance.organization_id)
        self.fields["assign_to"].queryset = agents
        self.created_task = None

    def clean(self):
        data = super().clean()
        if self.errors or self.request is None:
            return data
        target = data.get("assign_to")
        org = self.instance.organization if self.instance.pk else data.get("organization")
        if target is not None and org is not None and target.organization_id != org.pk:
            raise ValidationError(
                {"assign_to": "The agent must belong to the task's organization."}
            )
        try:
            # A savepoint: a refused move leaves nothing behind, and the form shows why.
            with transaction.atomic():
                actor = human_actor(self.request)
                if self.instance.pk is None:
                    self.created_task = services.task_create(
                        org=org, actor=actor, title=data["title"],
                        description=data.get("description", ""),
                        required_expertise=data.get("required_expertise", ""),
                        urgency=data["urgency"], deadline=data.get("deadline"), assignee=target,
                    )  # fmt: skip
                elif target is not None and target.pk != self.instance.assignee_id:
                    services.task_assign(task=self.instance, actor=actor, to=target)
        except DomainError as exc:
            raise ValidationError(f"{exc.message} ({exc.code})") from None
        return data


@admin.register(Task)
class TaskAdmin(TasksAppAdmin):
    form = TaskAdminForm
    list_display = [
        "title", "status_badge", "urgency", "assignee", "queued_for", "age", "organization",
    ]  # fmt: skip
    list_filter = [NeedsAttentionFilter, "status", "urgency"]  # + organization, scoped
    list_select_related = ["assignee", "queued_for", "organization"]
    search_fields = ["title", "description", "assignee__handle", "queued_for__handle"]
    readonly_fields = [
        "status", "assignee", "queued_for", "created_by_agent", "created_by_user",
        "delegation_chain", "queued_at", "assigned_at", "finished_at", "created_at", "updated_at",
    ]  # fmt: skip
    inlines = [TaskEventInline]
    actions = ["cancel_tasks", "escalate_tasks"]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class RequestForm(form):
            def __init__(self, *args, **inner):
                super().__init__(*args, request=request, **inner)

        return RequestForm

    def get_fieldsets(self, request, obj=None):
        editable = ["organization", "title", "description", "required_expertise", "urgency",
                    "deadline", "assign_to"]  # fmt: skip
        return [(None, {"fields": editable}), ("State", {"fields": self.readonly_fields})]

    def save_model(self, request, obj, form, change):
        if form.created_task is not None:
            # The service created the row; hand its identity to the admin for the redirect/log.
            obj.pk = obj.id = form.created_task.pk
            obj._state.adding = False
            return
        fields = ["title", "description", "required_expertise", "urgency", "deadline"]
        values = {f: form.cleaned_data[f] for f in fields if f in form.cleaned_data}
        # Only metadata: status and assignee are the services' (the row may have just moved).
        Task.objects.filter(pk=obj.pk).update(
            **values, urgency_rank=URGENCY_RANK[values["urgency"]], updated_at=timezone.now()
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, task):
        return badge(task.status)

    @admin.display(description="age", ordering="created_at")
    def age(self, task):
        return timesince(task.created_at, timezone.now())

    def _run(self, request, queryset, service, verb, **kwargs):
        done = 0
        for task in queryset:
            try:
                service(task=task, actor=human_actor(request), **kwargs)
                done += 1
            except DomainError as exc:
                self.message_user(request, f"{task}: {exc.message}", messages.WARNING)
        if done:
            self.message_user(request, f"{verb} {done} task(s).", messages.SUCCESS)

    @admin.action(description="Cancel the selected tasks")
    def cancel_tasks(self, request, queryset):
        self._run(
            request, queryset, services.task_cancel, "Cancelled", reason="Cancelled in the admin."
        )

    @admin.action(description="Escalate the selected tasks")
    def escalate_tasks(self, request, queryset):
        self._run(
            request, queryset, services.task_escalate, "Escalated", reason="Escalated in the admin."
        )


@admin.register(TaskEvent)
class TaskEventAdmin(AuditAdmin):
    list_display = ["created_at", "task", "kind", "actor_label", "recipient", "decision"]
    list_filter = ["kind", "actor_kind", "decision"]
    list_select_related = ["task", "recipient"]
    search_fields = ["task__title", "actor_label", "message"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AuditAdmin):
    list_display = [
        "created_at", "agent", "status_badge", "attempts", "response_status", "outcome", "url",
    ]  # fmt: skip
    list_filter = ["status"]
    list_select_related = ["agent"]
    search_fields = ["agent__handle", "url"]
    # Not even as a read-only form field: the detail page shows every field it does not exclude.
    exclude = ["last_error"]

    def get_readonly_fields(self, request, obj=None):
        # Staff see the coarse outcome, never the stored error text (rows older than the
        # SSRF rule kept exception details that tell which internal ports answer).
        fields = [f for f in super().get_readonly_fields(request, obj) if f != "last_error"]
        return [*fields, "outcome"]

    @admin.display(description="outcome")
    def outcome(self, delivery):
        return webhooks.outcome_of(delivery.status, delivery.last_error)

    @admin.display(description="status", ordering="status")
    def status_badge(self, delivery):
        return badge(delivery.status)
