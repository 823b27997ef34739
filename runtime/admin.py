"""Runs in the admin: a record a human can read, and the runs on the task and agent pages.

The runtime sits above `tasks` and `organization`, so it adds its inlines to their admins by
registering them again with the inline appended (the apps below never import this one).
"""

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from costs.selectors import cost_subquery
from organization.admin.registrations import AgentAdmin
from organization.admin.scoping import (
    STATUS_COLOURS,
    HumanChoicesFilter,
    OrgOwnedAdmin,
    ReadOnlyInline,
    badge,
    human,
)
from organization.models import Agent
from tasks.admin import TaskAdmin
from tasks.models import Task

from .models import Run, RunStatus, RunTrigger
from .services import held_wakes, run_release

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

    def get_queryset(self, request):
        # A row's label and links read these: not a query each per trigger.
        return super().get_queryset(request).select_related("agent", "task", "woken_by__agent")


@admin.register(Run)
class RunAdmin(OrgOwnedAdmin):
    list_display = [
        "id", "agent", "task", "trigger_display", "status_badge", "turn_count", "tokens", "cost", "attempts",
        "started_at", "finished_at",
    ]  # fmt: skip
    list_filter = [("status", HumanChoicesFilter), ("trigger", HumanChoicesFilter)]
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
                    "depth",
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
                    "cost",
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
            "status_badge", "story", "outcome_display", "cost"
        ]  # fmt: skip

    @admin.display(description="cost (USD)", ordering="cost_usd")
    def cost(self, run):
        return f"{run.cost_usd:.6f}".rstrip("0").rstrip(".") if run.cost_usd else "0"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="trigger", ordering="trigger")
    def trigger_display(self, run):
        return human(run.trigger)

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return badge(run.status, "run", human(run.status))

    def get_queryset(self, request):
        # The cost as a subquery: a second aggregate joined in would multiply the turn count.
        return (
            super()
            .get_queryset(request)
            .annotate(turn_count=Count("turn_rows"), cost_usd=cost_subquery("run"))
        )

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


# The runs on the task and agent pages are read-only fields, not inlines: an inline adds a
# formset whose management form every POST of those pages would then have to carry.
RUNS_SHOWN = 20


def _runs_table(rows):
    """(run, trigger, agent, task, status) rows as a small HTML table (escaped)."""
    if not rows:
        return "—"
    body = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((_run_link(run), trigger, run.agent.handle, f"#{run.task_id}" if run.task_id else "—",
          badge(run.status, "run", human(run.status)), run.created_at.strftime("%Y-%m-%d %H:%M:%S"))
         for run, trigger in rows),
    )  # fmt: skip
    return format_html(
        "<table><thead><tr><th>run</th><th>trigger</th><th>agent</th><th>first task</th>"
        "<th>status</th><th>created</th></tr></thead><tbody>{}</tbody></table>",
        body,
    )


def held_wakes_exist() -> Exists:
    """The task (of the outer query) has a wake-up a bound holds (by the held triggers' index)."""
    return Exists(
        RunTrigger.objects.filter(
            organization_id=OuterRef("organization_id"), task_id=OuterRef("pk")
        ).exclude(held="")
    )


class HeldWakesFilter(admin.SimpleListFilter):
    """Tasks whose managed agents a bound of wake chains stopped (the dashboard links here)."""

    title = "wake-ups"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("yes", "Held by a bound (a human releases them)")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(held_wakes_exist())
        return queryset


class TaskAdminWithRuns(TaskAdmin):
    readonly_fields = [*TaskAdmin.readonly_fields, "managed_runs"]
    list_filter = [*TaskAdmin.list_filter, HeldWakesFilter]

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/runtime/release/", view(self.release_view),
                 name="tasks_task_runtime_release"),
            *super().get_urls(),
        ]  # fmt: skip

    def release_view(self, request, object_id):
        """The held wake-ups of the task wake their agents, as a human's act (POST)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        task = self.get_object(request, object_id)  # scoped to the user's organizations
        if task is None:
            raise Http404
        if not self.has_change_permission(request, task):
            raise PermissionDenied
        released = run_release(organization_id=task.organization_id, task_id=task.pk)
        self.message_user(
            request, f"Released {released} held wake-up(s): the agents are woken.", messages.SUCCESS
        )
        return redirect(reverse("admin:tasks_task_change", args=[task.pk]))

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.pk is not None:
            held = held_wakes(organization_id=obj.organization_id, task_id=obj.pk)
            rows = [
                {"agent": t.agent.name, "trigger": human(t.trigger), "run": t.woken_by_id,
                 "why": t.held_because, "since": t.created_at}
                for t in held.select_related("agent")
            ]  # fmt: skip
            context = {**context, "held_wakes": rows}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_fieldsets(self, request, obj=None):
        sets = [
            (name, {**options, "fields": [f for f in options["fields"] if f != "managed_runs"]})
            for name, options in super().get_fieldsets(request, obj)
        ]
        return [*sets, ("Managed runs it woke", {"fields": ["managed_runs"]})]

    @admin.display(description="runs")
    def managed_runs(self, task):
        if task.pk is None:
            return "—"
        triggers = (
            RunTrigger.objects.filter(task=task, run__isnull=False)
            .select_related("run__agent")
            .order_by("-pk")[:RUNS_SHOWN]
        )
        return _runs_table([(t.run, t.trigger) for t in triggers])


class AgentAdminWithRuns(AgentAdmin):
    readonly_fields = [*AgentAdmin.readonly_fields, "latest_runs"]
    fieldsets = [*AgentAdmin.fieldsets, ("Runs (managed runtime)", {"fields": ["latest_runs"]})]
    actions = [*AgentAdmin.actions, "release_held_wakes"]

    @admin.action(description="Release the wake-ups held for the selected agents")
    def release_held_wakes(self, request, queryset):
        released = 0
        for organization_id in {a.organization_id for a in queryset}:
            agent_ids = [a.pk for a in queryset if a.organization_id == organization_id]
            released += run_release(organization_id=organization_id, agent_ids=agent_ids)
        self.message_user(request, f"Released {released} held wake-up(s).", messages.SUCCESS)

    @admin.display(description="latest runs")
    def latest_runs(self, agent):
        if agent.pk is None:
            return "—"
        runs = Run.objects.filter(agent=agent).select_related("agent").order_by("-pk")
        return _runs_table([(run, run.trigger) for run in runs[:RUNS_SHOWN]])


for model, model_admin in ((Task, TaskAdminWithRuns), (Agent, AgentAdminWithRuns)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
