"""Tasks in the admin: a product screen over the same services as the API.

Staff see only the organizations they administer, scoped by organization/admin's
`OrgScoped`/`OrgOwnedAdmin` (as every other admin page); superusers see all.
Assignments made here go through `services.task_create` / `task_assign`, so the rules of
docs/design.md (capacity, offline, …) hold in the admin too; human-initiated moves bypass the role
checks exactly as over REST. The audit trail is read-only and cannot be deleted.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.timesince import timesince
from django.views.decorators.http import require_POST

from infrastructure.errors import DomainError
from organization import webhooks
from organization.admin.actors import key_name_of, label_words
from organization.admin.display import STATUS_COLOURS, HumanChoicesFilter, badge, breakable, human
from organization.admin.scoping import (
    OrgOwnedAdmin,
    ReadOnlyInline,
    admin_org_ids,
    sees_several_organizations,
)
from organization.admin.words import duration
from organization.caller import caller_for_admin
from organization.models import Agent

from . import services
from .models import (
    URGENCY_RANK,
    DeliveryStatus,
    EventKind,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
    WebhookDelivery,
)
from .rules import Actor
from .sweep import stale_queued

STATUS_COLOURS["task"] = {
    TaskStatus.QUEUED: "#6c757d",
    TaskStatus.ASSIGNED: "#0d6efd",
    TaskStatus.IN_PROGRESS: "#0dcaf0",
    TaskStatus.BLOCKED: "#fd7e14",
    TaskStatus.COMPLETED: "#198754",
    TaskStatus.FAILED: "#dc3545",
    TaskStatus.CANCELLED: "#adb5bd",
    TaskStatus.ESCALATED: "#d63384",
}
STATUS_COLOURS["delivery"] = {
    DeliveryStatus.PENDING: "#6c757d",
    DeliveryStatus.DELIVERED: "#198754",
}


def admin_actor(request, organization) -> Actor:
    """The staff user acting in the admin, as the engine sees them (from the admin's Caller)."""
    return Actor.of(caller_for_admin(request, organization))


class MoveRefused(Exception):
    """The engine refused the move `save_model` asked for; the form is shown again with why."""

    def __init__(self, error: DomainError):
        super().__init__(error.message)
        self.error = error


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


def state_words(state: dict | None) -> str:
    """An audit snapshot in words: "in progress, held by agent-alex", "queued for agent-sam"."""
    state = state or {}
    said = human(state.get("status")).lower() if state.get("status") else "nowhere"
    if state.get("assignee"):
        said += f", held by {state['assignee']}"
    if state.get("queued_for"):
        said += f", queued for {state['queued_for']}"
    return said


# What a human must look at: tasks escalated to humans, and blocked ones (a managed agent's run
# that failed blocks its task with the reason, issue 11 §2).
NEEDS_ATTENTION = (TaskStatus.ESCALATED, TaskStatus.BLOCKED)


@dataclass(frozen=True)
class Attention:
    """Another reason a task waits on a human, told by an app above this one (a budget holding
    its holder back): `value` is the list filter's `?attention=` value, `condition()` the tasks
    it selects (a Q over Task)."""

    value: str
    label: str
    condition: Callable[[], Q]


ATTENTION: list[Attention] = []


def register_attention(reason: Attention) -> Attention:
    """Add `reason` to the tasks list's attention filter and to its "Needs attention" choice."""
    if reason.value in ("needs", "stale") or any(a.value == reason.value for a in ATTENTION):
        raise ValueError(f"An attention filter is already named {reason.value!r}.")
    ATTENTION.append(reason)
    return reason


def needs_attention() -> Q:
    """The tasks that wait on a human: escalated, blocked, or held for a registered reason."""
    condition = Q(status__in=NEEDS_ATTENTION)
    for reason in ATTENTION:
        condition |= reason.condition()
    return condition


class NeedsAttentionFilter(admin.SimpleListFilter):
    title = "attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        why = ["escalated to humans", "blocked", *(reason.label.lower() for reason in ATTENTION)]
        return [
            ("needs", f"Needs attention ({', '.join(why[:-1])} or {why[-1]})"),
            ("stale", "Queued past its threshold or deadline"),
            *[(reason.value, reason.label) for reason in ATTENTION],
        ]

    def queryset(self, request, queryset):
        if self.value() == "needs":
            return queryset.filter(needs_attention())
        if self.value() == "stale":
            return queryset.filter(pk__in=stale_queued(timezone.now()).values("pk"))
        for reason in ATTENTION:
            if self.value() == reason.value:
                return queryset.filter(reason.condition())
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


class SubtaskInline(ReadOnlyInline):
    """The task's subtasks (issue 11 §1), each linking to its own page."""

    model = Task
    fk_name = "parent"
    parent_org_path = "organization"
    verbose_name = "subtask"
    verbose_name_plural = "subtasks"
    ordering = ["created_at", "pk"]
    fields = ["title", "status", "assignee", "result", "finished_at"]
    readonly_fields = fields
    show_change_link = True


class TaskCommentInline(ReadOnlyInline):
    """The conversation on the task, oldest first. Django escapes every value it shows, so a
    comment's HTML is shown as text."""

    model = TaskComment
    fk_name = "task"
    parent_org_path = "organization"
    ordering = ["created_at", "pk"]
    fields = ["created_at", "author_label", "body"]
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

    def clean(self):
        data = super().clean()
        if self.errors or self.request is None:
            return data
        refused = getattr(self.request, "_task_move_refused", None)
        if refused is not None:
            # Found by save_model on the first pass of this POST (see changeform_view).
            raise ValidationError(f"{refused.message} ({refused.code})")
        target = data.get("assign_to")
        org = self.instance.organization if self.instance.pk else data.get("organization")
        if target is not None and org is not None and target.organization_id != org.pk:
            raise ValidationError(
                {"assign_to": "The agent must belong to the task's organization."}
            )
        return data


# Events that do not move the task (it stays in its state): a comment, its subtasks done.
NOT_A_MOVE = (EventKind.COMMENT, EventKind.SUBTASKS_DONE)


def _latest_event_time(*, moves_only: bool = False) -> Subquery:
    """When the task's latest event (or latest move) was written: one correlated subquery over
    the (task, created_at) index, so a page of tasks is still one query."""
    events = TaskEvent.objects.filter(task=OuterRef("pk"))
    if moves_only:
        events = events.exclude(kind__in=NOT_A_MOVE)
    return Subquery(events.order_by("-created_at", "-pk").values("created_at")[:1])


def ago(moment, now=None) -> str:
    """'3 hours', the largest unit only: a column a manager scans."""
    return timesince(moment, now or timezone.now(), depth=1) if moment else "—"


@admin.register(Task)
class TaskAdmin(TasksAppAdmin):
    form = TaskAdminForm
    # What a manager scans and sorts by: the state and for how long, who has it, the last move.
    list_display = ["title", "status_badge", "urgency_display", "holder", "in_state", "last_event"]
    list_filter = [
        NeedsAttentionFilter,
        ("status", HumanChoicesFilter),
        ("urgency", HumanChoicesFilter),
    ]  # + organization, scoped
    list_select_related = ["assignee", "queued_for", "organization"]
    ordering = ["-created_at", "-pk"]
    search_fields = ["title", "description", "assignee__handle", "queued_for__handle"]
    readonly_fields = [
        "status", "assignee", "queued_for", "created_by_agent", "created_by_user",
        "delegation_chain", "queued_at", "assigned_at", "finished_at", "created_at", "updated_at",
        "parent", "result", "result_data",
    ]  # fmt: skip
    inlines = [SubtaskInline, TaskCommentInline, TaskEventInline]
    actions = ["cancel_tasks", "cancel_tasks_with_subtasks", "escalate_tasks"]

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

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except MoveRefused as refused:
            # The view's transaction rolled back all the POST wrote. Run it again: the form,
            # bound to the same data, now carries the engine's reason and is shown as usual.
            request._task_move_refused = refused.error
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        """Through the engine: the task is created, or reassigned, by the services."""
        data = form.cleaned_data
        target = data.get("assign_to")
        try:
            if not change:
                created = services.task_create(
                    org=obj.organization, actor=admin_actor(request, obj.organization),
                    title=obj.title, description=obj.description,
                    required_expertise=obj.required_expertise, urgency=obj.urgency,
                    deadline=obj.deadline, assignee=target,
                )  # fmt: skip
                # The admin goes on with `obj` (log entry, redirect): give it the saved row.
                for model_field in Task._meta.concrete_fields:
                    setattr(obj, model_field.attname, getattr(created, model_field.attname))
                return
            fields = ["title", "description", "required_expertise", "urgency", "deadline"]
            values = {f: data[f] for f in fields if f in data}
            # Only metadata: status and assignee are the services'.
            Task.objects.filter(pk=obj.pk).update(
                **values, urgency_rank=URGENCY_RANK[values["urgency"]], updated_at=timezone.now()
            )
            if target is not None and target.pk != obj.assignee_id:
                services.task_assign(
                    task=obj, actor=admin_actor(request, obj.organization), to=target
                )
        except DomainError as exc:
            raise MoveRefused(exc) from exc

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                # In its state since its latest move (created: its creation).
                state_since=Coalesce(_latest_event_time(moves_only=True), F("created_at")),
                last_event_at=Coalesce(_latest_event_time(), F("created_at")),
            )
        )

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if sees_several_organizations(request):
            columns.append("organization")
        return columns

    @admin.display(description="status", ordering="status")
    def status_badge(self, task):
        return badge(task.status, "task", human(task.status))

    @admin.display(description="urgency", ordering="urgency_rank")
    def urgency_display(self, task):
        label = human(task.urgency)
        if task.urgency_rank >= URGENCY_RANK["high"]:
            return format_html("<strong>{}</strong>", label)
        return label

    @admin.display(description="with", ordering="assignee__name")
    def holder(self, task):
        if task.assignee_id:
            return task.assignee.name
        if task.queued_for_id:
            return format_html('<span class="quiet">queued for</span> {}', task.queued_for.name)
        return "—"

    @admin.display(description="in this state", ordering="state_since")
    def in_state(self, task):
        return ago(getattr(task, "state_since", None) or task.created_at)

    @admin.display(description="last event", ordering="-last_event_at")
    def last_event(self, task):
        moment = getattr(task, "last_event_at", None) or task.created_at
        return format_html('<span title="{}">{} ago</span>', moment, ago(moment))

    # --- queue for a full expert (the escalation banner's "Queue for them") --------------------

    def get_urls(self):
        return [
            path(
                "<path:object_id>/queue/",
                self.admin_site.admin_view(self.queue_view),
                name="tasks_task_queue",
            ),
            *super().get_urls(),
        ]

    def task_to_move(self, request, object_id) -> Task:
        """The task a page's button moves: one of the user's organizations' (else 404) that
        they may change (else 403)."""
        task = self.get_object(request, object_id)
        if task is None:
            raise Http404
        if not self.has_change_permission(request, task):
            raise PermissionDenied
        return task

    @method_decorator(require_POST)
    def queue_view(self, request, object_id):
        """POST `agent` (a handle): the task waits for that full expert, by `task_queue` as over
        `POST /api/tasks/<id>/queue`, with the staff user as its actor."""
        task = self.task_to_move(request, object_id)
        page = redirect(reverse("admin:tasks_task_change", args=[task.pk]))
        expert = Agent.objects.filter(
            organization=task.organization, handle=request.POST.get("agent", "")
        ).first()
        if expert is None:
            self.message_user(request, "Choose an agent of the organization.", messages.ERROR)
            return page
        try:
            services.task_queue(task=task, actor=admin_actor(request, task.organization), to=expert)
        except DomainError as exc:
            self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
            return page
        self.message_user(
            request,
            f"Queued for {expert.name}: theirs as soon as they have room.",
            messages.SUCCESS,
        )
        return page

    def _run(self, request, queryset, service, verb, **kwargs):
        done = 0
        for task in queryset:
            try:
                service(task=task, actor=admin_actor(request, task.organization), **kwargs)
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

    @admin.action(description="Cancel the selected tasks with their open subtasks")
    def cancel_tasks_with_subtasks(self, request, queryset):
        self._run(
            request, queryset, services.task_cancel, "Cancelled",
            reason="Cancelled in the admin.", cancel_subtasks=True,
        )  # fmt: skip

    @admin.action(description="Escalate the selected tasks")
    def escalate_tasks(self, request, queryset):
        self._run(
            request, queryset, services.task_escalate, "Escalated", reason="Escalated in the admin."
        )


@admin.register(TaskEvent)
class TaskEventAdmin(AuditAdmin):
    list_display = ["when", "task_title", "what", "by", "to", "decision_display"]
    list_display_links = ["when"]
    list_filter = [(f, HumanChoicesFilter) for f in ("kind", "actor_kind", "decision")]
    list_select_related = ["task", "recipient", "organization"]
    search_fields = ["task__title", "actor_label", "message"]
    ordering = ["-created_at", "-pk"]

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if sees_several_organizations(request):
            columns.append("organization")
        return columns

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


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AuditAdmin):
    list_display = [
        "created_at", "agent", "status_badge", "attempts", "response_status", "outcome", "address",
    ]  # fmt: skip
    list_filter = [("status", HumanChoicesFilter)]
    list_select_related = ["agent"]
    search_fields = ["agent__handle", "url"]
    # Not even as a read-only form field: the detail page shows every field it does not exclude.
    exclude = ["last_error"]

    def get_readonly_fields(self, request, obj=None):
        # Staff see the coarse outcome, never the stored error text (rows older than the
        # SSRF rule kept exception details that tell which internal ports answer).
        fields = [f for f in super().get_readonly_fields(request, obj) if f != "last_error"]
        return [*fields, "outcome"]

    @admin.display(description="URL", ordering="url")
    def address(self, delivery):
        return breakable(delivery.url)  # wraps after its slashes and dots, not inside a word

    @admin.display(description="outcome")
    def outcome(self, delivery):
        return webhooks.outcome_of(delivery.status, delivery.last_error)

    @admin.display(description="status", ordering="status")
    def status_badge(self, delivery):
        return badge(delivery.status, "delivery", human(delivery.status))
