"""The run's admin: a record a human can read — who, on what, why, how it went, what it cost."""

from django.contrib import admin
from django.db.models import Count
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join

from costs.money import usd
from costs.selectors import cost_subquery
from organization.admin.display import STATUS_COLOURS, HumanChoicesFilter, badge, human, two_lines
from organization.admin.scoping import OrgOwnedAdmin
from organization.admin.words import duration
from tasks.models import Task

from ..models import Run, RunStatus
from .telling import WOKEN_BECAUSE, conversation, outcome_sentence, run_link

STATUS_COLOURS["run"] = {
    RunStatus.QUEUED: "#6c757d",
    RunStatus.RUNNING: "#0dcaf0",
    RunStatus.COMPLETED: "#198754",
    RunStatus.FAILED: "#dc3545",
}


@admin.register(Run)
class RunAdmin(OrgOwnedAdmin):
    # One cell per question (who, on what, why, how it went, how much, when): a list that fits
    # a 1280 px window; the attempts and the exact times are on the run's page.
    list_display = [
        "id",
        "agent",
        "task",
        "trigger_display",
        "status_badge",
        "turn_count",
        "cost",
        "when",
    ]
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
        ),
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
        ),
        (
            "What the model was given",
            {"classes": ["collapse"], "fields": ["system_prompt", "input"]},
        ),
    ]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Run._meta.fields] + [
            "status_badge",
            "story",
            "outcome_display",
            "cost",
            "woken_because",
        ]

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
                    run_link(trigger.woken_by),
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
            "",
            '<div class="run-outcome">{}</div>',
            ((outcome_sentence(o, titles),) for o in run.outcome),
        )

    @admin.display(description="turn by turn")
    def story(self, run):
        """The model's words and each tool call with its arguments and answer (escaped)."""
        entries = conversation(run)
        if not entries:
            return "—"
        return render_to_string("admin/runtime/run/conversation.html", {"entries": entries})
