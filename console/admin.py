"""The console's pages behind the dashboard: a task told as a story, a collaboration opening on
its outcome, an agent on its live state; and the lists' cost columns. The lower apps' admins are
registered again, extended (as runtime/admin/pages.py does); every move goes through the services."""

from django.contrib import admin, messages
from django.db.models import DecimalField, F, OuterRef, Subquery, Sum
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from collaboration.admin import CollaborationSessionAdmin
from collaboration.models import CollaborationSession
from costs.models import UsageRecord
from costs.selectors import start_of_month
from infrastructure.errors import DomainError
from organization.admin.words import duration
from organization.models import Agent
from runtime.admin import AgentAdminWithRuns, TaskAdminWithRuns
from tasks import services
from tasks.admin import TaskAdmin, admin_actor
from tasks.models import COMMENT_MAX_LENGTH, NOTE_MAX_LENGTH, Task

from .agent_state import agent_state
from .outcome import collaboration_outcome
from .story import task_story, told_in_words
from .words import money

# Shown in the story instead of the form (no raw JSON on the page).
TOLD_IN_THE_STORY = {"delegation_chain", "result", "result_data", "managed_runs"}


def cost_of(since=None, **match) -> Subquery:
    """The ledger's total for the outer row (`task_id=OuterRef("pk")`, …), from `since` if
    given, as one correlated subquery: a page of a list is still one query, and it sorts."""
    rows = UsageRecord.objects.filter(**match)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    rows = rows.order_by().values(*match).annotate(total=Sum("cost_usd")).values("total")
    return Subquery(rows, output_field=DecimalField(max_digits=19, decimal_places=9))


# Nothing spent (NULL: no model call) sorts as the cheapest: PostgreSQL puts NULLs first in a
# descending sort, which listed them above the costliest rows.
BY_COST = F("cost_usd").asc(nulls_first=True)


class CostColumn:
    """A sortable "cost" column from a `cost_usd` annotation (None: no model call)."""

    @admin.display(description="cost", ordering=BY_COST)
    def cost(self, obj):
        return money(obj.cost_usd) if obj.cost_usd is not None else "—"

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        # Last, or just before the organization's column when that one closes the row.
        at = len(columns) - 1 if columns and columns[-1] == "organization" else len(columns)
        columns.insert(at, "cost")
        return columns


class ConsoleTaskAdmin(CostColumn, TaskAdminWithRuns):
    change_form_template = "admin/console/task_change_form.html"
    # Subtasks, comments and the audit trail are told by the story above the form.
    inlines = []

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(cost_usd=cost_of(task_id=OuterRef("pk")))

    # The calls on the task itself (one subquery a row); its page and the API add its subtasks'.
    @admin.display(description="own cost", ordering=BY_COST)
    def cost(self, obj):
        return CostColumn.cost(self, obj)

    def get_fieldsets(self, request, obj=None):
        sets = TaskAdmin.get_fieldsets(self, request, obj)
        if obj is None:
            return sets
        return [
            (
                name,
                {**options, "fields": [f for f in options["fields"] if f not in TOLD_IN_THE_STORY]},
            )
            for name, options in sets
        ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.pk is not None:
            context = {
                **context,
                "story": told_in_words(task_story(obj), obj.organization_id),
                "runs": self.managed_runs(obj),
                "task": obj,
                "comment_max_length": COMMENT_MAX_LENGTH,
                "reason_max_length": NOTE_MAX_LENGTH,
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    # --- the banner's actions, each one service call ------------------------------------------

    def get_urls(self):
        # tasks_task_console_assign, _comment and _cancel: POST <task>/console/<action>/.
        actions = {
            "assign": self.assign_view,
            "comment": self.comment_view,
            "cancel": self.cancel_view,
        }
        view = self.admin_site.admin_view
        return [
            *(
                path(
                    f"<path:object_id>/console/{name}/",
                    view(act),
                    name=f"tasks_task_console_{name}",
                )
                for name, act in actions.items()
            ),
            *super().get_urls(),
        ]

    def _back_to(self, request, task, message: str, level=messages.ERROR):
        """The task's change page, `message` shown above it."""
        self.message_user(request, message, level)
        return redirect(reverse("admin:tasks_task_change", args=[task.pk]))

    def _moved(self, request, task, done: str, move, **params):
        """`move(task=task, actor=the admin, **params)`; back to the task with `done` or why not."""
        try:
            move(task=task, actor=admin_actor(request, task.organization), **params)
        except DomainError as exc:
            return self._back_to(request, task, f"{exc.message} ({exc.code})")
        return self._back_to(request, task, done, messages.SUCCESS)

    @method_decorator(require_POST)
    def assign_view(self, request, object_id):
        task = self.task_to_move(request, object_id)
        agent = Agent.objects.filter(
            organization=task.organization, handle=request.POST.get("agent", "")
        ).first()
        if agent is None:
            return self._back_to(request, task, "Choose an agent of the organization.")
        return self._moved(
            request, task, f"Assigned to {agent.name}.", services.task_assign, to=agent
        )

    @method_decorator(require_POST)
    def comment_view(self, request, object_id):
        task = self.task_to_move(request, object_id)
        body = request.POST.get("body", "").strip()
        if not body or len(body) > COMMENT_MAX_LENGTH:
            return self._back_to(
                request, task, f"A comment holds 1 to {COMMENT_MAX_LENGTH} characters."
            )
        done = "Comment added: the agents involved are told."
        return self._moved(request, task, done, services.task_comment, body=body)

    @method_decorator(require_POST)
    def cancel_view(self, request, object_id):
        task = self.task_to_move(request, object_id)
        reason = request.POST.get("reason", "").strip() or "Cancelled in the admin."
        if len(reason) > NOTE_MAX_LENGTH:  # as the API's reason (the task's events carry it)
            return self._back_to(
                request, task, f"A reason holds at most {NOTE_MAX_LENGTH} characters."
            )
        return self._moved(request, task, "Cancelled.", services.task_cancel, reason=reason)


class ConsoleCollaborationAdmin(CostColumn, CollaborationSessionAdmin):
    """A session opens on its outcome; nothing on it is edited, so it has no Save button."""

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(cost_usd=cost_of(session_id=OuterRef("pk")))

    change_form_template = "admin/console/collaboration_change_form.html"
    inlines = []
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "organization",
                    "mode",
                    "synthesis",
                    "status_badge",
                    "progress",
                    "started_by",
                    "created_at",
                    "started_at",
                    "finished_at",
                    "error",
                ]
            },
        ),
        (
            "Limits",
            {
                "classes": ["collapse"],
                "fields": [
                    "max_parallel",
                    "time_per_agent",
                    "max_total_tokens",
                    "attempts",
                    "cancel_requested",
                ],
            },
        ),
    ]
    readonly_fields = [f for _, o in fieldsets for f in o["fields"]]

    @admin.display(description="time per agent")
    def time_per_agent(self, session):
        return duration(session.agent_timeout)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
            "title": "Collaboration",
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context = {**context, "session": obj, "outcome": collaboration_outcome(obj)}
        return super().render_change_form(request, context, add, change, form_url, obj)


class ConsoleAgentAdmin(CostColumn, AgentAdminWithRuns):
    """An agent opens on its live state (console/agent_state.py), then its settings; the list
    has its cost this month."""

    change_form_template = "admin/console/agent_change_form.html"
    # The live state lists its latest runs.
    fieldsets = AgentAdminWithRuns.fieldsets[:-1]

    def get_queryset(self, request):
        month = cost_of(since=start_of_month(), agent_id=OuterRef("pk"))
        return super().get_queryset(request).annotate(cost_usd=month)

    @admin.display(description="cost this month", ordering=BY_COST)
    def cost(self, obj):
        return money(obj.cost_usd) if obj.cost_usd is not None else "—"

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.pk is not None:
            context = {**context, "live": agent_state(obj), "agent": obj}
        return super().render_change_form(request, context, add, change, form_url, obj)


for model, model_admin in (
    (Task, ConsoleTaskAdmin),
    (CollaborationSession, ConsoleCollaborationAdmin),
    (Agent, ConsoleAgentAdmin),
):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
