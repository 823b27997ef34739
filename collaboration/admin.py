"""Collaborative sessions in the admin: status, progress, contributions, events, and a form to
start one. LLM text is shown escaped in <pre> blocks; staff see only the organizations they
administer.
"""

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from infrastructure.errors import DomainError
from organization.admin.actors import key_name_of, label_words
from organization.admin.display import STATUS_COLOURS, HumanChoicesFilter, badge, human
from organization.admin.scoping import (
    OrgScoped,
    ReadOnlyInline,
    admin_org_ids,
    sees_several_organizations,
)
from organization.caller import caller_for_admin
from organization.models import Agent, Organization

from . import services
from .models import (
    FINISHED_CONTRIBUTION_STATUSES,
    CollaborationSession,
    Contribution,
    ContributionStatus,
    Mode,
    SessionEvent,
    SessionStatus,
    Synthesis,
)

STATUS_COLOURS["collaboration"] = {
    SessionStatus.QUEUED: "#6c757d",
    SessionStatus.RUNNING: "#0d6efd",
    SessionStatus.SYNTHESIZING: "#6f42c1",
    SessionStatus.COMPLETED: "#198754",
    SessionStatus.PARTIAL: "#fd7e14",
    SessionStatus.FAILED: "#dc3545",
    SessionStatus.CANCELLED: "#adb5bd",
    ContributionStatus.PENDING: "#6c757d",
    ContributionStatus.RUNNING: "#0d6efd",
    ContributionStatus.TIMED_OUT: "#fd7e14",
    ContributionStatus.SKIPPED: "#adb5bd",
}


def pre(text: str):
    # format_html escapes `text`: a <script> in an LLM answer stays text.
    return format_html('<pre style="white-space:pre-wrap;max-width:60em">{}</pre>', text or "")


class SessionRowInline(ReadOnlyInline):
    """Rows of a session (Django passes the session as `obj`): seen, never edited here."""

    org_path = "session__organization"
    parent_org_path = "organization"


class ContributionInline(SessionRowInline):
    model = Contribution
    ordering = ["position"]
    fields = [
        "agent_key", "role", "status_badge", "answer", "tool_calls", "confidence", "verdict",
        "tokens_used", "attempts", "provider", "model", "error", "started_at", "finished_at",
    ]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="status")
    def status_badge(self, obj):
        return badge(obj.status, "collaboration", human(obj.status))

    @admin.display(description="response")
    def answer(self, obj):
        return pre(obj.response)

    @admin.display(description="tool calls")
    def tool_calls(self, obj):
        """Each call of an agent with tools: name(arguments) → ok, or the error's code."""
        lines = [
            f"{t['name']}({json.dumps(t['arguments'], ensure_ascii=False)}) → "
            + (t["error"]["code"] if t["status"] == "error" else t["status"])
            for t in obj.turns or []
            if t.get("kind") == "tool_call"
        ]
        return pre("\n".join(lines)) if lines else "—"


class SessionEventInline(SessionRowInline):
    model = SessionEvent
    ordering = ["id"]
    fields = ["created_at", "name", "data"]
    readonly_fields = fields


@admin.register(CollaborationSession)
class CollaborationSessionAdmin(OrgScoped, admin.ModelAdmin):
    # The question, how it went and how it was run; the times in one sortable column.
    list_display = ["short_task", "status_badge", "progress", "how", "started_by", "when"]
    list_filter = [(f, HumanChoicesFilter) for f in ("status", "mode", "synthesis")]
    search_fields = ["task", "created_by"]
    list_select_related = ["organization"]
    date_hierarchy = "created_at"
    inlines = [ContributionInline, SessionEventInline]
    actions = ["cancel_sessions"]
    fieldsets = [
        (None, {"fields": ["organization", "task", "mode", "synthesis", "status_badge",
                           "progress", "started_by", "created_at", "started_at", "finished_at"]}),
        ("Result", {"fields": ["result_text", "error", "consensus", "metadata"]}),
        ("Settings", {"fields": ["context", "coordinator_config", "max_parallel", "agent_timeout",
                                 "max_total_tokens", "attempts", "cancel_requested"]}),
    ]  # fmt: skip
    readonly_fields = [f for _, o in fieldsets for f in o["fields"]]

    def get_queryset(self, request):
        # OrgScoped.get_queryset keeps the user's organizations only.
        return (
            super()
            .get_queryset(request)
            .annotate(
                created_by_key_name=key_name_of("created_by"),
                agents_total=Count("contributions", distinct=True),
                agents_done=Count(
                    "contributions",
                    filter=Q(contributions__status__in=FINISHED_CONTRIBUTION_STATUSES),
                    distinct=True,
                ),
            )
        )

    def has_add_permission(self, request):
        return False  # sessions start through the "Start collaboration" form

    def has_delete_permission(self, request, obj=None):
        return False

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if sees_several_organizations(request):
            columns.append("organization")
        return columns

    @admin.display(description="question")
    def short_task(self, obj):
        return obj.task if len(obj.task) <= 90 else obj.task[:89] + "…"

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return badge(obj.status, "collaboration", human(obj.status))

    @admin.display(description="started by", ordering="created_by")
    def started_by(self, obj):
        return label_words(obj.created_by, getattr(obj, "created_by_key_name", None)) or "—"

    @admin.display(description="how", ordering="mode")
    def how(self, obj):
        return f"{human(obj.mode)} · {human(obj.synthesis)}"

    @admin.display(description="started", ordering="created_at")
    def when(self, obj):
        local = timezone.localtime(obj.created_at)
        took = ""
        if obj.finished_at and obj.started_at:
            took = f" · took {timesince(obj.started_at, obj.finished_at, depth=1)}"
        return format_html(
            '<span title="{}">{}</span>{}', local.isoformat(), local.strftime("%b %d, %H:%M"), took
        )

    @admin.display(description="progress")
    def progress(self, obj):
        total = getattr(obj, "agents_total", None)
        done = getattr(obj, "agents_done", None)
        if total is None:
            contributions = list(obj.contributions.all())
            total, done = len(contributions), sum(c.is_finished for c in contributions)
        return f"{done}/{total} agents done"

    @admin.display(description="result")
    def result_text(self, obj):
        return pre(obj.result)

    @admin.action(description="Cancel the selected sessions")
    def cancel_sessions(self, request, queryset):
        cancelled = 0
        for session in queryset:
            if session.is_finished:
                continue
            caller = caller_for_admin(request, session.organization)
            try:
                services.session_cancel(caller=caller, session=session)
            except DomainError:
                continue  # it finished since the list was read (409 session_finished)
            cancelled += 1
        self.message_user(request, f"Cancellation requested for {cancelled} session(s).")

    # --- the "Start collaboration" form ------------------------------------------------------

    def get_urls(self):
        start = self.admin_site.admin_view(self.start_view)
        return [
            path("start/", start, name="collaboration_collaborationsession_start"),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "start_url": reverse("admin:collaboration_collaborationsession_start"),
        }
        return super().changelist_view(request, extra_context)

    def start_view(self, request):
        if not self._allowed(request):
            raise PermissionDenied
        ids = admin_org_ids(request)
        orgs = (
            Organization.objects.all() if ids is None else Organization.objects.filter(pk__in=ids)
        )
        form = StartCollaborationForm(request.POST or None, organizations=orgs)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            payload = {
                "task": data["task"],
                "mode": data["mode"],
                "synthesis": data["synthesis"],
                "agents": [
                    {"agent_id": a.handle, **({"focus": data["focus"]} if data["focus"] else {})}
                    for a in form.ordered_agents()
                ],
            }
            caller = caller_for_admin(request, data["organization"])
            try:
                session = services.session_create(caller=caller, payload=payload)
            except DomainError as exc:
                form.add_error(None, exc.message)
            else:
                self.message_user(request, "The session is queued on a worker.", messages.SUCCESS)
                return redirect(
                    reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "title": "Start collaboration",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(
            request, "admin/collaboration/collaborationsession/start.html", context
        )


class StartCollaborationForm(forms.Form):
    organization = forms.ModelChoiceField(queryset=Organization.objects.none())
    task = forms.CharField(widget=forms.Textarea(attrs={"rows": 5, "cols": 80}))
    agents = forms.ModelMultipleChoiceField(
        queryset=Agent.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Organization agents (paused agents are offline and cannot take part). "
        "In hierarchical mode the first one, by name, coordinates.",
    )
    focus = forms.CharField(required=False, help_text="Optional focus given to every agent.")
    # Callables: the form offers the server's defaults as they are when it is shown.
    mode = forms.ChoiceField(choices=Mode.choices, initial=lambda: settings.COLLAB_DEFAULT_MODE)
    synthesis = forms.ChoiceField(
        choices=Synthesis.choices, initial=lambda: settings.COLLAB_DEFAULT_SYNTHESIS
    )

    def __init__(self, *args, organizations, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["organization"].queryset = organizations
        if organizations.count() == 1:
            self.fields["organization"].initial = organizations.first()
        self.fields["agents"].queryset = (
            Agent.objects.filter(organization__in=organizations, is_paused=False)
            .select_related("organization")
            .order_by("organization__name", "name")
        )
        self.fields["agents"].label_from_instance = lambda a: (
            f"{a.name} — {a.role or 'no job title'} ({a.handle}, {a.organization})"
        )

    def clean(self):
        data = super().clean()
        org, agents = data.get("organization"), data.get("agents")
        if org and agents and any(a.organization_id != org.pk for a in agents):
            raise forms.ValidationError("Pick agents of the chosen organization only.")
        return data

    def ordered_agents(self):
        return sorted(self.cleaned_data["agents"], key=lambda a: (a.name, a.handle))
