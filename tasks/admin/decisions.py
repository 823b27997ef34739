"""Approval policies and decisions in the console: edit the policies, decide what waits.

A decision's page shows the request in words and its buttons; the e-mailed one-click links open
its confirmation page (after login), where one POST decides (docs/decisions.md).
"""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpResponseRedirect
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from infrastructure.errors import DomainError
from infrastructure.inputs import parse_id
from organization.admin.scoping import OrgOwnedAdmin
from organization.caller import caller_for_admin

from .. import services
from ..decisions import describe
from ..models import POLICY_FIELDS, ApprovalPolicy, DecisionKind, DecisionStatus, HumanDecision
from ..services.decisions import target_of
from ..services.notify import VERBS, read_link_token
from .base import OrganizationColumn, TasksAppAdmin

# The statuses a policy's page counts, so a human can tune it.
COUNTED = ("approved", "rejected", "expired", "pending")


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(OrganizationColumn, OrgOwnedAdmin):
    list_display = ["name", "trigger", "scope", "enabled", "on_expiry", "how_it_went"]
    list_filter = ["trigger", "enabled"]
    list_select_related = ["organization"]
    fields = [
        "organization",
        *POLICY_FIELDS,
        "how_it_went",
    ]
    readonly_fields = ["how_it_went"]
    raw_id_fields = ["team", "agent"]

    def get_queryset(self, request):
        # How its decisions went, counted with the rows (one query for the page).
        counted = {
            f"n_{status}": Count("decisions", filter=Q(decisions__status=status))
            for status in COUNTED
        }
        return super().get_queryset(request).annotate(**counted)

    @admin.display(description="Decisions (approved / rejected / expired / pending)")
    def how_it_went(self, policy):
        if policy.pk is None:
            return "—"
        return " / ".join(f"{getattr(policy, f'n_{s}', 0)} {s}" for s in COUNTED)

    def save_model(self, request, obj, form, change):
        # Through the service: the organization's gate flag follows the policies.
        fields = {f: getattr(obj, f) for f in form.cleaned_data if f != "organization"}
        if change:
            services.policy_update(policy=obj, **fields)
        else:
            created = services.policy_create(org=obj.organization, **fields)
            obj.pk = created.pk

    def delete_model(self, request, obj):
        services.policy_delete(policy=obj)


@admin.register(HumanDecision)
class HumanDecisionAdmin(OrganizationColumn, TasksAppAdmin):
    list_display = ["__str__", "kind", "status", "requester_label", "task", "expires_at"]
    list_filter = ["status", "kind"]
    list_select_related = ["organization", "task"]
    readonly_fields = ["request_in_words", "snapshot"]
    fields = ["request_in_words", "snapshot"]
    # The buttons' form follows the page's own (forms do not nest): change_view passes it.
    change_form_template = "admin/tasks/humandecision/change_form.html"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # decided through the buttons (the services), never edited

    def get_urls(self):
        confirm = self.admin_site.admin_view(self.confirm_view)
        decide = self.admin_site.admin_view(self.decide_view)
        return [
            path("<int:pk>/confirm/<str:verb>/", confirm, name="tasks_humandecision_confirm"),
            path("<int:pk>/decide/", decide, name="tasks_humandecision_decide"),
            *super().get_urls(),
        ]

    @admin.display(description="Request")
    def request_in_words(self, decision):
        rows = [
            ("Status", decision.status),
            ("Asked by", decision.requester_label),
            ("Request", describe(decision)),
            ("Why it waits", decision.reason or "—"),
            ("Task", f"#{decision.task_id}" if decision.task_id else "—"),
            ("Options", ", ".join(decision.options) or "—"),
            ("Expires", decision.expires_at or "—"),
            ("Decided by", decision.decided_by_label or "—"),
            ("Comment", decision.comment or "—"),
            ("Answer", decision.answer or "—"),
            ("Outcome", decision.outcome or "—"),
        ]
        return format_html(
            "<table>{}</table>",
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows),
        )

    @admin.display(description="Target: asked about / now")
    def snapshot(self, decision):
        arguments = (decision.action or {}).get("arguments")
        now = target_of(decision.task_id, arguments)["task"]
        then = decision.target.get("task")
        changed = " (changed since)" if then != now else ""
        return format_html("{} / {}{}", then or "—", now or "—", changed)

    def buttons(self, decision, csrf: str):
        if not decision.is_pending:
            return ""
        url = reverse("admin:tasks_humandecision_decide", args=[decision.pk])
        verbs = ["approve", "reject", "request_changes"]
        if decision.kind == DecisionKind.QUESTION:
            verbs = ["answer"]
        return format_html(
            '<form method="post" action="{}" id="decide"><input type="hidden" '
            'name="csrfmiddlewaretoken" value="{}">{}<input name="text" placeholder="{}" '
            'size="60"> {}</form>',
            url,
            csrf,
            format_html_join(
                "",
                "<label><input type='radio' name='answer' value='{}'> {}</label> ",
                ((o, o) for o in decision.options),
            ),
            "Answer" if decision.kind == DecisionKind.QUESTION else "Comment (optional)",
            format_html_join(
                " ",
                '<button type="submit" name="verb" value="{}">{}</button>',
                ((v, v.replace("_", " ").capitalize()) for v in verbs),
            ),
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        decision = self.get_queryset(request).filter(pk=parse_id(object_id) or 0).first()
        if decision is not None:
            extra_context = {
                **(extra_context or {}),
                "decide_form": self.buttons(decision, get_token(request)),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def _decision(self, request, pk) -> HumanDecision:
        decision = get_object_or_404(self.get_queryset(request), pk=pk)
        return decision

    def decide(self, request, decision: HumanDecision, verb: str, text: str = ""):
        """Decide as the logged-in member, through the API's services; the outcome as a message."""
        caller = caller_for_admin(request, decision.organization)
        try:
            if verb == "approve":
                services.decision_approve(caller=caller, pk=decision.pk, comment=text)
            elif verb == "answer":
                answer = request.POST.get("answer") or text
                services.decision_close(
                    caller=caller, pk=decision.pk, status=DecisionStatus.ANSWERED, answer=answer
                )
            elif verb in ("reject", "request_changes"):
                status = {"reject": DecisionStatus.REJECTED}.get(
                    verb, DecisionStatus.CHANGES_REQUESTED
                )
                services.decision_close(caller=caller, pk=decision.pk, status=status, comment=text)
            else:
                raise PermissionDenied
        except DomainError as exc:
            self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
        else:
            decision.refresh_from_db()
            self.message_user(request, f"Decision #{decision.pk}: {decision.status}.")
        return HttpResponseRedirect(reverse("admin:tasks_humandecision_change", args=[decision.pk]))

    def decide_view(self, request, pk):
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:tasks_humandecision_change", args=[pk]))
        decision = self._decision(request, pk)
        return self.decide(
            request, decision, request.POST.get("verb", ""), request.POST.get("text", "")
        )

    def confirm_view(self, request, pk, verb):
        """The e-mailed link's page: the request and one button; the POST decides, once."""
        decision = self._decision(request, pk)
        token = request.GET.get("t") or request.POST.get("t") or ""
        if verb not in VERBS or not read_link_token(
            token, decision_id=decision.pk, verb=verb, username=request.user.get_username()
        ):
            raise PermissionDenied("This link is not valid for you.")
        if request.method == "POST":
            return self.decide(request, decision, verb, request.POST.get("comment", ""))
        context = {
            **self.admin_site.each_context(request),
            "title": f"{verb.capitalize()} decision #{decision.pk}?",
            "decision": decision,
            "request_in_words": self.request_in_words(decision),
            "verb": verb,
            "token": token,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/tasks/humandecision/confirm.html", context)
