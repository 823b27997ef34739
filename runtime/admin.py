"""Runs in the admin: a record a human can read, and the runs on the task and agent pages.

The runtime sits above `tasks` and `organization`, so it adds its inlines to their admins by
registering them again with the inline appended (the apps below never import this one).
"""

import json

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from organization.admin.registrations import AgentAdmin
from organization.admin.scoping import STATUS_COLOURS, OrgOwnedAdmin, ReadOnlyInline, badge
from organization.models import Agent
from tasks.admin import TaskAdmin
from tasks.models import Task

from .models import Run, RunStatus, RunTrigger

STATUS_COLOURS["run"] = {
    RunStatus.QUEUED: "#6c757d",
    RunStatus.RUNNING: "#0dcaf0",
    RunStatus.COMPLETED: "#198754",
    RunStatus.FAILED: "#dc3545",
}
# How much of a tool result or a model text the run's page shows (the API has it all).
SHOWN_CHARS = 1_500


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _run_link(run: Run):
    url = reverse("admin:runtime_run_change", args=[run.pk])
    return format_html('<a href="{}">run #{}</a>', url, run.pk)


class RunTriggerInline(ReadOnlyInline):
    model = RunTrigger
    fk_name = "run"
    parent_org_path = "organization"
    fields = ["created_at", "trigger", "task", "woken_by"]
    readonly_fields = fields
    verbose_name = "trigger"
    verbose_name_plural = "what woke the agent"


@admin.register(Run)
class RunAdmin(OrgOwnedAdmin):
    list_display = [
        "id", "agent", "task", "trigger", "status_badge", "turn_count", "tokens", "attempts",
        "started_at", "finished_at",
    ]  # fmt: skip
    list_filter = ["status", "trigger"]
    list_select_related = ["agent", "task", "organization"]
    search_fields = ["agent__handle", "task__title", "error"]
    inlines = [RunTriggerInline]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "organization",
                    "agent",
                    "task",
                    "trigger",
                    "status_badge",
                    "previous",
                    "error",
                    "outcome_display",
                ]
            },
        ),  # fmt: skip
        ("The conversation", {"fields": ["story"]}),
        (
            "Usage and timing",
            {
                "fields": [
                    "provider",
                    "model",
                    "max_turns",
                    "prompt_tokens",
                    "completion_tokens",
                    "attempts",
                    "created_at",
                    "started_at",
                    "finished_at",
                ]
            },
        ),  # fmt: skip
        (
            "What the model was given",
            {"classes": ["collapse"], "fields": ["system_prompt", "input"]},
        ),  # fmt: skip
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Run._meta.fields] + [
            "status_badge", "story", "outcome_display"
        ]  # fmt: skip

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return badge(run.status, "run")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(turn_count=Count("turn_rows"))

    @admin.display(description="turns", ordering="turn_count")
    def turn_count(self, run):
        return run.turn_count

    @admin.display(description="tokens")
    def tokens(self, run):
        return run.tokens_used

    @admin.display(description="outcome")
    def outcome_display(self, run):
        if not run.outcome:
            return "—"
        return format_html_join(
            "", "<div>task #{}: {} {}</div>",
            ((o.get("task"), o.get("action"), o.get("why", "")) for o in run.outcome),
        )  # fmt: skip

    @admin.display(description="turns, in order")
    def story(self, run):
        """Each model turn and tool call as a line a human reads (escaped)."""
        rows = []
        for turn in run.turns or []:
            if turn.get("kind") == "model":
                calls = ", ".join(c["name"] for c in turn.get("tool_calls") or [])
                rows.append((
                    f"model ({turn.get('prompt_tokens', 0)}+{turn.get('completion_tokens', 0)} "
                    f"tokens, {turn.get('provider_ms', '?')} ms)",
                    _cut(turn.get("text") or "") + (f"\n→ calls {calls}" if calls else ""),
                ))  # fmt: skip
            else:
                body = turn.get("result") if turn.get("status") == "ok" else turn.get("error")
                rows.append((
                    f"{turn.get('name')} [{turn.get('status')}]",
                    f"{json.dumps(turn.get('arguments'), ensure_ascii=False)}\n→ "
                    + _cut(json.dumps(body, ensure_ascii=False, default=str)),
                ))  # fmt: skip
        if not rows:
            return "—"
        return format_html_join(
            "", '<div style="margin-bottom:6px"><b>{}</b><pre style="white-space:pre-wrap;'
            'margin:2px 0">{}</pre></div>', rows,
        )  # fmt: skip


class TaskRunInline(ReadOnlyInline):
    """The runs a task woke (on the task's page)."""

    model = RunTrigger
    fk_name = "task"
    parent_org_path = "organization"
    fields = ["created_at", "trigger", "agent", "run_link", "run_status"]
    readonly_fields = fields
    verbose_name = "managed run"
    verbose_name_plural = "managed runs it woke"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent", "run")

    @admin.display(description="run")
    def run_link(self, trigger):
        return _run_link(trigger.run) if trigger.run_id else "waiting"

    @admin.display(description="run status")
    def run_status(self, trigger):
        return badge(trigger.run.status, "run") if trigger.run_id else "—"


class AgentRunInline(ReadOnlyInline):
    """A managed agent's latest runs (on the agent's page)."""

    model = Run
    fk_name = "agent"
    parent_org_path = "organization"
    fields = ["run_link", "task", "trigger", "status_badge", "created_at", "finished_at", "error"]
    readonly_fields = fields
    verbose_name = "run"
    verbose_name_plural = "runs (managed runtime)"
    ordering = ["-created_at", "-pk"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("task")

    @admin.display(description="run")
    def run_link(self, run):
        return _run_link(run)

    @admin.display(description="status")
    def status_badge(self, run):
        return badge(run.status, "run")


class TaskAdminWithRuns(TaskAdmin):
    inlines = [*TaskAdmin.inlines, TaskRunInline]


class AgentAdminWithRuns(AgentAdmin):
    inlines = [*AgentAdmin.inlines, AgentRunInline]


for model, model_admin in ((Task, TaskAdminWithRuns), (Agent, AgentAdminWithRuns)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
