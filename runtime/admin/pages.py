"""The runs on the task and agent pages, and the release of held wake-ups from them.

The runtime registers the admins of the apps below again, extended (they never import it)."""

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from organization.admin.agents import AgentAdmin
from organization.admin.display import badge, human
from organization.models import Agent
from tasks.admin import TaskAdmin
from tasks.models import Task

from ..models import Run, RunTrigger
from ..services import held_wakes, run_release
from .telling import run_link

# The runs on the task and agent pages are read-only fields, not inlines: an inline adds a
# formset whose management form every POST of those pages would then have to carry.
RUNS_SHOWN = 20


def _runs_table(rows):
    """(run, trigger, agent, task, status) rows as a small HTML table (escaped)."""
    if not rows:
        return "—"
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                run_link(run),
                human(trigger),
                run.agent.handle,
                f"#{run.task_id}" if run.task_id else "—",
                badge(run.status, "run", human(run.status)),
                run.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            )
            for run, trigger in rows
        ),
    )
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
            path(
                "<path:object_id>/runtime/release/",
                view(self.release_view),
                name="tasks_task_runtime_release",
            ),
            *super().get_urls(),
        ]

    @method_decorator(require_POST)
    def release_view(self, request, object_id):
        """The held wake-ups of the task wake their agents, as a human's act (POST)."""
        task = self.task_to_move(request, object_id)
        released = run_release(organization_id=task.organization_id, task_id=task.pk)
        self.message_user(
            request, f"Released {released} held wake-up(s): the agents are woken.", messages.SUCCESS
        )
        return redirect(reverse("admin:tasks_task_change", args=[task.pk]))

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.pk is not None:
            held = held_wakes(organization_id=obj.organization_id, task_id=obj.pk)
            rows = [
                {
                    "agent": t.agent.name,
                    "trigger": human(t.trigger),
                    "run": t.woken_by_id,
                    "why": t.held_because,
                    "since": t.created_at,
                }
                for t in held.select_related("agent")
            ]
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
