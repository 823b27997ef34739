"""The ledger and the budgets in the admin: costs by agent, team, model and day as bars, budgets
with a bar of spent / held / remaining, unpriced calls flagged; budgets are written through
`budgets.budget_set`.
"""

from datetime import date, timedelta
from decimal import Decimal

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.html import format_html

from infrastructure.errors import DomainError
from infrastructure.inputs import parse_id
from organization.admin.display import STATUS_COLOURS, badge, breakable, human, two_lines
from organization.admin.history import HistoryAdmin
from organization.admin.scoping import OrgOwnedAdmin, admin_org_ids
from organization.caller import caller_for_admin
from organization.models import Organization

from .alerts import figures
from .budgets import budget_delete, budget_set, current_view, state_of
from .models import MONTHLY_SCOPES, ZERO, Budget, BudgetAlert, BudgetScope, PriceSource, UsageRecord
from .money import usd as money
from .selectors import GROUPS, cost_rows

REPORT_DAYS = 30
STATUS_COLOURS["budget"] = {
    "ok": "#198754",
    "warning": "#fd7e14",
    "exhausted": "#dc3545",
    "alert": "#dc3545",
    "overspent": "#842029",
}


@admin.register(UsageRecord)
class UsageRecordAdmin(OrgOwnedAdmin):
    # Fits a 1280 px window: the model as provider over name (wrapping at its punctuation), the
    # tokens in one cell, choices in words.
    list_display = [
        "created_at",
        "agent",
        "purpose_display",
        "model_name",
        "tokens",
        "cost",
        "state_display",
        "self_reported",
    ]
    list_filter = ["purpose", "state", "self_reported", "price_source", "provider"]
    list_select_related = ["agent", "organization"]
    search_fields = ["agent__handle", "model", "provider"]
    date_hierarchy = "created_at"
    change_list_template = "admin/costs/usagerecord/change_list.html"

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="model", ordering="model")
    def model_name(self, record):
        return two_lines(breakable(record.model), record.provider)

    @admin.display(description="tokens in · out", ordering="prompt_tokens")
    def tokens(self, record):
        return two_lines(
            f"{record.prompt_tokens:,} in",
            f"{record.completion_tokens:,} out",
        )

    @admin.display(description="purpose", ordering="purpose")
    def purpose_display(self, record):
        return human(record.purpose)

    @admin.display(description="state", ordering="state")
    def state_display(self, record):
        return human(record.state)

    @admin.display(description="cost", ordering="cost_usd")
    def cost(self, record):
        if record.price_source == PriceSource.UNKNOWN:
            # The banner above the list says how to price it (LLM_PRICES).
            return badge("unknown", "alert", "no price")
        return money(record.cost_usd)

    def get_urls(self):
        report = self.admin_site.admin_view(self.report_view)
        return [path("report/", report, name="costs_usagerecord_report"), *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        unpriced = self.get_queryset(request).filter(price_source=PriceSource.UNKNOWN).count()
        extra = {"unpriced": unpriced, "report_url": reverse("admin:costs_usagerecord_report")}
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def report_view(self, request):
        """Costs for a period, grouped by agent, team, model or day, as bars."""
        org = _report_org(request)
        group_by = request.GET.get("group_by", "agent")
        group_by = group_by if group_by in GROUPS else "agent"
        today = timezone.now().date()
        since = _report_date(request, "since") or today - timedelta(days=REPORT_DAYS)
        until = _report_date(request, "until") or today
        rows = []
        if org is not None:
            caller = caller_for_admin(request, org)
            # The calendar's first and last days have no midnight around them in every time
            # zone: from the first is from the start, up to the last is up to the end.
            start = None if since == date.min else _midnight(since)
            end = None if until == date.max else _midnight(until + timedelta(days=1))
            rows = cost_rows(caller=caller, group_by=group_by, since=start, until=end)
        top = max([r["cost_usd"] for r in rows] + [Decimal(0)])
        for row in rows:
            row["share"] = float(row["cost_usd"] / top * 100) if top else 0.0
            row["money"] = money(row["cost_usd"])
            row["key"] = row["key"] if row["key"] is not None else "(none)"
        total = sum((r["cost_usd"] for r in rows), ZERO)
        context = {
            **self.admin_site.each_context(request),
            "title": "Costs",
            "opts": self.model._meta,
            "organization": org,
            "organizations": _orgs(request),
            "rows": rows,
            "group_by": group_by,
            "groups": list(GROUPS),
            "since": since,
            "until": until,
            "total": money(total),
            "calls": sum(r["calls"] for r in rows),
        }
        return TemplateResponse(request, "admin/costs/usagerecord/report.html", context)


def _orgs(request):
    ids = admin_org_ids(request)
    orgs = Organization.objects.order_by("name")
    return orgs if ids is None else orgs.filter(pk__in=ids)


def _report_org(request) -> Organization | None:
    orgs = _orgs(request)
    chosen = request.GET.get("organization")
    if not chosen:
        return orgs.first()
    pk = parse_id(chosen)
    if pk is None:
        _ignored(request, "organization", chosen, "not an organization's id")
        return orgs.first()
    return orgs.filter(pk=pk).first()


def _report_date(request, name: str) -> date | None:
    """The report's `since` or `until` (YYYY-MM-DD); a bad one is ignored, with a message,
    so that a mistyped address still shows a report (the default period)."""
    value = request.GET.get(name)
    if not value:
        return None
    try:
        parsed = parse_date(value)
    except ValueError:  # well formed, but no such day (2024-02-30)
        parsed = None
    if parsed is None:
        _ignored(request, name, value, "not a date (YYYY-MM-DD)")
    return parsed


def _ignored(request, name: str, value: str, why: str) -> None:
    # repr: whatever the address held (a NUL, a control character) reads as text.
    messages.warning(request, f"Ignored {name}={value[:40]!r}: {why}.")


def _midnight(day: date):
    return timezone.make_aware(timezone.datetime.combine(day, timezone.datetime.min.time()))


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = ["organization", "scope", "team", "agent", "task", "limit_usd"]

    def clean(self):
        data = super().clean()
        scope = data.get("scope") or (self.instance.scope if self.instance.pk else None)
        if self.instance.pk is None and scope in (
            BudgetScope.TEAM,
            BudgetScope.AGENT,
            BudgetScope.TASK,
        ):
            if not data.get(scope):
                raise ValidationError({scope: f"A {scope} budget needs its {scope}."})
        if self.instance.pk is None and scope == BudgetScope.COLLABORATION:
            raise ValidationError({"scope": "A collaboration's budget is its max_cost_usd."})
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        for name in ("team", "agent", "task"):
            subject = data.get(name)
            if subject is not None and organization and subject.organization_id != organization.pk:
                raise ValidationError({name: f"This {name} is not of {organization}."})
        return data


@admin.register(Budget)
class BudgetAdmin(HistoryAdmin, OrgOwnedAdmin):
    form = BudgetForm
    list_display = ["__str__", "scope", "limit", "bar", "state_badge", "period"]
    list_filter = ["scope"]
    list_select_related = ["organization", "team", "agent"]
    autocomplete_fields = ["team", "agent"]
    raw_id_fields = ["task"]

    def get_readonly_fields(self, request, obj=None):
        readonly = tuple(super().get_readonly_fields(request, obj)) + (
            "period",
            "spent_usd",
            "reserved_usd",
            "bar",
            "created_by",
        )
        return readonly + ("scope", "team", "agent", "task") if obj is not None else readonly

    def get_fields(self, request, obj=None):
        fields = ["organization", "scope", "team", "agent", "task", "limit_usd"]
        return fields + (
            ["bar", "period", "spent_usd", "reserved_usd", "created_by"] if obj else []
        )

    @admin.display(description="limit", ordering="limit_usd")
    def limit(self, budget):
        return f"{money(budget.limit_usd)}{' / month' if budget.scope in MONTHLY_SCOPES else ''}"

    @admin.display(description="spent · held · left")
    def bar(self, budget):
        budget = current_view(budget)
        limit = budget.limit_usd or Decimal(1)
        spent = min(float(budget.spent_usd / limit * 100), 100.0)
        held = min(float(budget.reserved_usd / limit * 100), 100.0 - spent)
        return format_html(
            '<div class="budget-bar" title="{} spent, {} held, {} left">'
            '<span style="width:{}%;background:#dc3545"></span>'
            '<span style="width:{}%;background:#ffc107"></span></div>'
            "<small>{} spent · {} held · {} left</small>",
            money(budget.spent_usd),
            money(budget.reserved_usd),
            money(max(budget.remaining_usd, ZERO)),
            f"{spent:.1f}",
            f"{held:.1f}",
            money(budget.spent_usd),
            money(budget.reserved_usd),
            money(max(budget.remaining_usd, ZERO)),
        )

    @admin.display(description="state")
    def state_badge(self, budget):
        budget = current_view(budget)
        if budget.is_overspent:  # calls it could not refuse took it past
            return badge("overspent", "budget")
        return badge(state_of(budget), "budget")

    def save_model(self, request, obj, form, change):
        """Through the service (as the API): it checks the scope and wakes waiting agents."""
        caller = caller_for_admin(request, obj.organization)
        try:
            saved, _ = budget_set(
                caller=caller,
                scope=obj.scope,
                limit_usd=obj.limit_usd,
                team=obj.team.name if obj.team_id else None,
                agent=obj.agent.handle if obj.agent_id else None,
                task=obj.task_id,
                session=obj.session if obj.session_id else None,
            )
        except DomainError as exc:  # the form checked the subject: a bug, not the user's
            raise RuntimeError(exc.message) from exc
        # The admin goes on with `obj` (its log, its redirect): the row the service wrote.
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        """Through the service: a budget removed wakes the agents it held."""
        budget_delete(caller=caller_for_admin(request, obj.organization), budget=obj)

    def delete_queryset(self, request, queryset):
        for budget in queryset.select_related("organization"):
            self.delete_model(request, budget)


@admin.register(BudgetAlert)
class BudgetAlertAdmin(OrgOwnedAdmin):
    """Each alert names its budget (a link to it) and shows it as it is now beside what it said
    when it was raised: a limit raised or a new month since reads at a glance."""

    list_display = ["created_at", "kind_badge", "budget_link", "message", "now", "read_at"]
    list_filter = ["kind", "period", ("read_at", admin.EmptyFieldListFilter)]
    list_select_related = ["organization", "budget__organization", "budget__team", "budget__agent"]
    actions = ["mark_read"]

    @admin.display(description="budget", ordering="budget")
    def budget_link(self, alert):
        url = reverse("admin:costs_budget_change", args=[alert.budget_id])
        return format_html('<a href="{}">{}</a>', url, str(alert.budget))

    @admin.display(description="now")
    def now(self, alert):
        budget = current_view(alert.budget)
        return format_html(
            "{} {} · {}",
            budget.period if budget.is_monthly else "lifetime",
            figures(budget),
            badge("overspent" if budget.is_overspent else state_of(budget), "budget"),
        )

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="kind")
    def kind_badge(self, alert):
        return badge(alert.kind, "budget")

    @admin.action(description="Mark as read")
    def mark_read(self, request, queryset):
        marked = queryset.filter(Q(read_at__isnull=True)).update(read_at=timezone.now())
        # Said either way: an action that only reloads the list reads as one that did nothing.
        if marked:
            self.message_user(
                request,
                f"Marked {marked} alert{'s' if marked > 1 else ''} as read.",
                messages.SUCCESS,
            )
        else:
            self.message_user(
                request, "No alert to mark: those selected were read already.", messages.INFO
            )
