"""The task's page and list: a product screen whose moves go through the services."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import SEARCH_VAR
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.text import smart_split, unescape_string_literal
from django.views.decorators.http import require_POST

from infrastructure.errors import DomainError
from infrastructure.prepared import planned_for_values
from organization.admin.display import HumanChoicesFilter, badge, human
from organization.admin.scoping import OrgAutocompleteSelect, ReadOnlyInline, admin_org_ids
from organization.models import Agent

from .. import services
from ..models import URGENCY_RANK, EventKind, Task, TaskComment, TaskEvent
from ..sql import tasks_searched
from .attention import NeedsAttentionFilter
from .base import MoveRefused, OrganizationColumn, TasksAppAdmin, admin_actor, ago


class TaskEventInline(ReadOnlyInline):
    """The audit trail under its task: append-only, written by the services alone."""

    model = TaskEvent
    fk_name = "task"
    parent_org_path = "organization"
    ordering = ["created_at", "pk"]
    fields = [
        "created_at",
        "kind",
        "actor_label",
        "recipient",
        "before",
        "after",
        "decision",
        "primary_choice",
        "reasoning",
        "wait_time_seconds",
        "coordination_note",
        "message",
    ]
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
        # A search over the task's organization, not a list of all its agents (thousands in a
        # big one): the admin's autocomplete of the task's holder, scoped like its own fields.
        field = self.fields["assign_to"]
        field.widget = OrgAutocompleteSelect(
            Task._meta.get_field("assignee"),
            admin.site,
            org_id=self.instance.organization_id
            if self.instance.pk
            else getattr(request, "_admin_scope_org_id", None),
        )
        field.widget.is_required = field.required
        field.queryset = agents  # after the widget: it hands the widget its choices

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


@admin.register(Task)
class TaskAdmin(OrganizationColumn, TasksAppAdmin):
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
    # What the search matches; `get_search_results` reads each through its index.
    search_fields = ["title", "description", "assignee__handle", "queued_for__handle"]
    readonly_fields = [
        "status",
        "assignee",
        "queued_for",
        "created_by_agent",
        "created_by_user",
        "delegation_chain",
        "queued_at",
        "assigned_at",
        "finished_at",
        "created_at",
        "updated_at",
        "parent",
        "result",
        "result_data",
    ]
    inlines = [SubtaskInline, TaskCommentInline, TaskEventInline]
    actions = ["cancel_tasks", "cancel_tasks_with_subtasks", "escalate_tasks"]

    def changelist_view(self, request, extra_context=None):
        if not request.GET.get(SEARCH_VAR):
            return super().changelist_view(request, extra_context)
        # A search's pattern is a parameter: its statements planned for it (`planned_for_values`).
        with planned_for_values():
            response = super().changelist_view(request, extra_context)
            if hasattr(response, "render"):
                response.render()  # the page's queries run as it renders: within
            return response

    def get_search_results(self, request, queryset, search_term):
        """`search_fields`' rule, each field read through its index (`tasks_searched`): the
        terms as the admin splits them (quotes keep words together), every one matching."""
        terms = [
            unescape_string_literal(bit) if bit[0] in "\"'" and bit[0] == bit[-1] else bit
            for bit in smart_split(search_term)
        ]
        if not terms:
            return queryset, False
        return queryset.filter(tasks_searched(terms)), False

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class RequestForm(form):
            def __init__(self, *args, **inner):
                super().__init__(*args, request=request, **inner)

        return RequestForm

    def get_fieldsets(self, request, obj=None):
        editable = [*TaskAdminForm.Meta.fields, "assign_to"]
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
                    org=obj.organization,
                    actor=admin_actor(request, obj.organization),
                    title=obj.title,
                    description=obj.description,
                    required_expertise=obj.required_expertise,
                    urgency=obj.urgency,
                    deadline=obj.deadline,
                    assignee=target,
                )
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
            request,
            queryset,
            services.task_cancel,
            "Cancelled",
            reason="Cancelled in the admin.",
            cancel_subtasks=True,
        )

    @admin.action(description="Escalate the selected tasks")
    def escalate_tasks(self, request, queryset):
        self._run(
            request, queryset, services.task_escalate, "Escalated", reason="Escalated in the admin."
        )
