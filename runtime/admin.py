"""Runs in the admin: a record a human can read, and the runs on the task and agent pages.

The runtime sits above `tasks` and `organization`, so it adds its inlines to their admins by
registering them again with the inline appended (the apps below never import this one).
"""

import json

from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from costs.money import usd
from costs.selectors import cost_subquery
from organization.admin.agents import AgentAdmin
from organization.admin.display import STATUS_COLOURS, HumanChoicesFilter, badge, human, two_lines
from organization.admin.scoping import OrgOwnedAdmin
from organization.admin.words import duration
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
# How much of a tool result or a model text the run's page shows (the API has it all), and past
# how many lines a result is folded under its first line.
SHOWN_CHARS = 6_000
FOLDED_LINES = 12

# What woke the agent, as a sentence about the task (the inbox kinds of runtime.models.TRIGGERS).
WOKEN_BECAUSE = {
    "created": "a task was created for it",
    "assigned": "a task was assigned to it",
    "auto_assigned": "a task queued for it reached it when it had room",
    "delegated": "a task was delegated to it",
    "escalated": "a task was escalated to it",
    "comment": "someone commented on a task it works on",
    "subtasks_done": "the last open subtask of its task finished",
    "resumed": "it was resumed with work waiting for it",
}


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _pretty(value) -> str:
    """A value as a person reads it: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _arguments(arguments) -> list[tuple[str, str]]:
    """A call's arguments as (name, value) lines."""
    if not isinstance(arguments, dict):
        return [("arguments", _pretty(arguments))] if arguments not in (None, "") else []
    return [(str(name), _cut(_pretty(value))) for name, value in arguments.items()]


def _tool_entry(turn: dict) -> dict:
    """A tool call: its name, its arguments as lines, and its answer or its refusal in words."""
    entry = {
        "kind": "tool",
        "name": turn.get("name"),
        "arguments": _arguments(turn.get("arguments")),
    }
    status = turn.get("status")
    if status == "error":
        error = turn.get("error")
        said = error.get("error", "") if isinstance(error, dict) else _pretty(error)
        code = error.get("code", "") if isinstance(error, dict) else ""
        return {**entry, "ok": False, "said": f"Refused: {said}", "code": code}
    if status != "ok":
        return {**entry, "ok": None, "said": "Running: its outcome is not recorded yet."}
    answer = turn.get("result")
    result = _cut(_pretty(answer))
    lines = result.count("\n") + 1
    return {
        **entry,
        "ok": True,
        "result": result,
        "lines": lines,
        "folded": lines > FOLDED_LINES,
        "gist": _gist(answer, result),
    }


def _gist(answer, shown: str) -> str:
    """What a folded answer holds, in a line: its fields, its count of items, or its start."""
    if isinstance(answer, dict):
        return "with " + ", ".join(str(key) for key in answer)
    if isinstance(answer, list):
        return f"{len(answer)} item{'' if len(answer) == 1 else 's'}"
    return shown.split("\n", 1)[0]


def conversation(run: Run) -> list[dict]:
    """The run's turns as the page tells them: the model's words, then each call it made with
    its arguments and what it answered (plain data; the template escapes every value)."""
    entries = []
    for turn in run.turns or []:
        if turn.get("kind") == "model":
            entries.append(
                {
                    "kind": "model",
                    "text": _cut(turn.get("text") or ""),
                    "tokens": (turn.get("prompt_tokens") or 0, turn.get("completion_tokens") or 0),
                    "ms": turn.get("provider_ms"),
                    "calls": [c.get("name") for c in turn.get("tool_calls") or []],
                }
            )
        else:
            entries.append(_tool_entry(turn))
    return entries


def outcome_sentence(item: dict, titles: dict[int, str]) -> str:
    """One line of a run's outcome: what the runtime did with a task once the model stopped."""
    task = f"Task #{item.get('task')}"
    if item.get("task") in titles:
        task += f" “{titles[item['task']]}”"
    action, why = item.get("action"), item.get("why", "")
    if action == "completed":
        return f"{task}: completed with the model's final answer."
    if action == "blocked":
        return f"{task}: blocked" + (f" — {why}." if why else ".")
    if action == "none":
        return f"{task}: left as it was" + (f" ({why})." if why else ".")
    return f"{task}: {human(action).lower()}" + (f" ({why})." if why else ".")


def _run_link(run: Run):
    url = reverse("admin:runtime_run_change", args=[run.pk])
    return format_html('<a href="{}">run #{}</a>', url, run.pk)


@admin.register(Run)
class RunAdmin(OrgOwnedAdmin):
    # One cell per question (who, on what, why, how it went, how much, when): a list that fits
    # a 1280 px window; the attempts and the exact times are on the run's page.
    list_display = [
        "id", "agent", "task", "trigger_display", "status_badge", "turn_count", "cost", "when",
    ]  # fmt: skip
    list_filter = [("status", HumanChoicesFilter), ("trigger", HumanChoicesFilter)]
    list_select_related = ["agent", "task", "organization"]
    search_fields = ["agent__handle", "task__title", "error"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "organization",
                    "agent",
                    "task",
                    "woken_because",
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
            "status_badge", "story", "outcome_display", "cost", "woken_because"
        ]  # fmt: skip

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, run):
        return usd(run.cost_usd or 0)

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

    @admin.display(description="turns · tokens", ordering="turn_count")
    def turn_count(self, run):
        return two_lines(
            f"{run.turn_count} turn{'' if run.turn_count == 1 else 's'}",
            f"{run.tokens_used:,} tokens",
        )

    @admin.display(description="started · took", ordering="started_at")
    def when(self, run):
        if run.started_at is None:
            return format_html('<span class="quiet">{}</span>', "not started")
        took = (
            duration((run.finished_at - run.started_at).total_seconds())
            if run.finished_at
            else "running"
        )
        return two_lines(
            date_format(timezone.localtime(run.started_at), "M j, H:i"),
            took,
        )

    @admin.display(description="woken because")
    def woken_because(self, run):
        """Each trigger as a sentence: when, why, which task, and whose run caused it."""
        triggers = run.triggers.select_related("task", "woken_by__agent").order_by("pk")
        lines = []
        for trigger in triggers:
            task = (
                format_html(
                    ' — <a href="{}">task #{} “{}”</a>',
                    reverse("admin:tasks_task_change", args=[trigger.task_id]),
                    trigger.task_id,
                    trigger.task.title,
                )
                if trigger.task_id
                else ""
            )
            by = (
                format_html(
                    " (caused by {} of {})",
                    _run_link(trigger.woken_by),
                    trigger.woken_by.agent.handle,
                )
                if trigger.woken_by_id
                else ""
            )
            lines.append(
                (
                    trigger.created_at.strftime("%H:%M:%S"),
                    WOKEN_BECAUSE.get(trigger.trigger, human(trigger.trigger)).capitalize(),
                    task,
                    by,
                )
            )
        if not lines:
            return WOKEN_BECAUSE.get(run.trigger, human(run.trigger)).capitalize() + "."
        return format_html_join(
            "", '<div class="run-trigger"><span class="quiet">{}</span> {}{}{}.</div>', lines
        )

    @admin.display(description="what the runtime did")
    def outcome_display(self, run):
        if not run.outcome:
            return "—"
        ids = [o.get("task") for o in run.outcome if isinstance(o.get("task"), int)]
        tasks = Task.objects.filter(organization_id=run.organization_id, pk__in=ids)
        titles = dict(tasks.values_list("pk", "title"))
        return format_html_join(
            "", '<div class="run-outcome">{}</div>',
            ((outcome_sentence(o, titles),) for o in run.outcome),
        )  # fmt: skip

    @admin.display(description="turn by turn")
    def story(self, run):
        """The model's words and each tool call with its arguments and answer (escaped)."""
        entries = conversation(run)
        if not entries:
            return "—"
        return render_to_string("admin/runtime/run/conversation.html", {"entries": entries})


# The runs on the task and agent pages are read-only fields, not inlines: an inline adds a
# formset whose management form every POST of those pages would then have to carry.
RUNS_SHOWN = 20


def _runs_table(rows):
    """(run, trigger, agent, task, status) rows as a small HTML table (escaped)."""
    if not rows:
        return "—"
    body = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((_run_link(run), human(trigger), run.agent.handle, f"#{run.task_id}" if run.task_id else "—",
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
