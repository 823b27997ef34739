"""The admin is the hierarchy editor (issue 2 §3): the organization app's registrations.

Scoped to the organizations the staff user administers by the toolkit in `scoping.py`; writes
go through organization/services.py (pause/resume, deletion, API keys) and hierarchy.py (the
role inline) in `save_model`, `save_formset`, `delete_model`, actions and custom views; the org
chart is in `chart.py`.
"""

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from infrastructure.errors import DomainError
from infrastructure.inputs import parse_id

from .. import registry
from ..caller import caller_for_admin
from ..hierarchy import role_delete, role_set
from ..models import (
    Agent,
    AgentRole,
    AgentRuntime,
    AgentStatus,
    ApiKey,
    ExpertiseGroup,
    HierarchyRole,
    Membership,
    Organization,
    Team,
    TeamRule,
)
from ..services import (
    agent_delete,
    agent_open_work,
    agent_room_changed,
    agent_set_paused,
    api_key_issue,
    api_key_revoke,
    webhook_secret_rotate,
)
from ..workload import (
    at_capacity,
    count_of,
    offline_with_work,
    status_for,
    with_status,
    workload_count,
)
from .chart import org_chart_view
from .history import HistoryAdmin, RelatedHistories
from .scoping import (
    HumanChoicesFilter,
    OrgOwnedAdmin,
    OrgScoped,
    ScopedRelatedFilter,
    admin_org_ids,
    badge,
    breakable,
    colour_of,
    human,
    sees_several_organizations,
    two_lines,
)


class OrgUniqueNameForm(forms.ModelForm):
    """Once organization is read-only Django skips the (organization, <name>) constraint: check it."""

    unique_in_org: str = "name"

    def clean(self):
        cleaned = super().clean()
        value = cleaned.get(self.unique_in_org)
        org_id = self.instance.organization_id
        if value and org_id and "organization" not in self.fields:
            clash = type(self.instance)._default_manager.filter(
                organization_id=org_id, **{self.unique_in_org: value}
            )
            if clash.exclude(pk=self.instance.pk).exists():
                label = self.instance._meta.get_field(self.unique_in_org).verbose_name
                self.add_error(
                    self.unique_in_org, f"This organization already has one with this {label}."
                )
        return cleaned


class ExpertiseField(forms.CharField):
    """Expertise one term per line in the form (a term may hold a comma), a JSON list in the database."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "One term per line, exact and case-sensitive.")
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 4, "cols": 40}))
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value):
        if isinstance(value, list):
            return value
        text = super().to_python(value)
        return [term.strip() for term in text.splitlines() if term.strip()]

    def has_changed(self, initial, data):
        return (initial or []) != self.to_python(data)


def _expertise(terms) -> str:
    return ", ".join(terms or []) or "—"


# --- organization ------------------------------------------------------------------------


class TeamInline(OrgScoped, admin.TabularInline):
    model = Team
    parent_org_path = "pk"
    extra = 0
    fields = ["name"]
    show_change_link = True


class MembershipInline(OrgScoped, admin.TabularInline):
    model = Membership
    parent_org_path = "pk"
    extra = 0
    fields = ["user", "is_admin"]
    verbose_name_plural = "members (humans)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user", "organization")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "user":
            # Read once for the page: every member's row renders the same drop-down, which
            # would otherwise query the users again per row.
            field.choices = list(field.choices)
        return field


class TeamRuleInline(OrgScoped, admin.StackedInline):
    model = TeamRule
    parent_org_path = "pk"
    can_delete = False
    max_num = 1
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "require_supervisor_for_tasks",
                    "allow_peer_assignment",
                    "default_supervisor",
                    "max_delegation_depth",
                ]
            },
        ),
        (
            "Stale queued tasks escalate after",
            {
                "fields": [
                    "stale_after_critical",
                    "stale_after_high",
                    "stale_after_normal",
                    "stale_after_low",
                ]
            },
        ),
    ]

    def get_formset(self, request, obj=None, **kwargs):
        # The default supervisor is one of this organization's agents (none yet on the add page).
        request._admin_scope_org_id = obj.pk if obj is not None and obj.pk else -1
        return super().get_formset(request, obj, **kwargs)


class ExpertiseGroupInlineForm(forms.ModelForm):
    expertise = ExpertiseField()

    class Meta:
        model = ExpertiseGroup
        fields = ["name", "expertise"]


class ExpertiseGroupInline(OrgScoped, admin.TabularInline):
    model = ExpertiseGroup
    form = ExpertiseGroupInlineForm
    parent_org_path = "pk"
    extra = 0


class ApiKeyInlineForm(forms.ModelForm):
    revoke = forms.BooleanField(required=False, help_text="The key stops working at once.")

    class Meta:
        model = ApiKey
        fields = []


class ApiKeyInline(OrgScoped, admin.TabularInline):
    """Keys are listed, never shown; they are created on the API key page and revoked here."""

    model = ApiKey
    form = ApiKeyInlineForm
    parent_org_path = "pk"
    extra = 0
    can_delete = False
    fields = ["name", "agent", "prefix", "created_at", "last_used_at", "revoked_at", "revoke"]
    readonly_fields = ["name", "agent", "prefix", "created_at", "last_used_at", "revoked_at"]
    verbose_name_plural = "API keys (create one with “Add API key” above)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Organization)
class OrganizationAdmin(RelatedHistories, OrgScoped, admin.ModelAdmin):
    org_path = "pk"
    # Its history page: the admin's log, then who changed the team rules (edited inline here).
    object_history_template = "admin/organization/organization/object_history.html"
    related_histories = [("Team rules", "team_rule", "organization_id")]
    list_display = ["name", "slug", "agent_count", "team_count", "org_chart_link"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [TeamRuleInline, TeamInline, MembershipInline, ExpertiseGroupInline, ApiKeyInline]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                agent_total=count_of(Agent.objects.all(), "organization"),
                team_total=count_of(Team.objects.all(), "organization"),
            )
        )

    actions = ["rotate_webhook_secret"]

    def get_readonly_fields(self, request, obj=None):
        # The slug names the organization in API calls (X-Organization); only superusers move it.
        fields = [] if request.user.is_superuser else ["slug"]
        # What its webhooks' receivers check X-Agent-Org-Signature with (its admins only).
        return fields if obj is None else [*fields, "webhook_secret_masked"]

    @admin.display(description="webhook secret")
    def webhook_secret_masked(self, org):
        """Masked until asked for: a screen shared or looked over does not give it away."""
        return format_html(
            '<details class="secret"><summary><span class="masked">{}</span> '
            '<span class="quiet">Reveal</span></summary><code id="webhook-secret">{}</code>'
            "</details>",
            "•" * 12,
            org.webhook_secret,
        )

    @admin.action(description="Rotate the webhook secret (receivers must take the new one)")
    def rotate_webhook_secret(self, request, queryset):
        rotated = webhook_secret_rotate(organizations=queryset)
        for organization in queryset:
            self.log_change(request, organization, "Rotated the webhook secret.")
        self.message_user(
            request, f"New webhook secret for {rotated} organization(s).", messages.SUCCESS
        )

    def get_prepopulated_fields(self, request, obj=None):
        return self.prepopulated_fields if request.user.is_superuser else {}

    def has_add_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    @admin.display(description="agents", ordering="agent_total")
    def agent_count(self, org):
        url = reverse("admin:organization_agent_changelist")
        return format_html(
            '<a href="{}?organization__id__exact={}">{}</a>', url, org.pk, org.agent_total
        )

    @admin.display(description="teams", ordering="team_total")
    def team_count(self, org):
        return org.team_total

    @admin.display(description="org chart")
    def org_chart_link(self, org):
        url = reverse("admin:organization_organization_org_chart", args=[org.pk])
        return format_html('<a href="{}">Org chart</a>', url)

    def get_urls(self):
        chart = self.admin_site.admin_view(self.org_chart)
        return [
            path("<int:object_id>/org-chart/", chart, name="organization_organization_org_chart"),
            *super().get_urls(),
        ]

    def org_chart(self, request, object_id: int):
        return org_chart_view(request, self, object_id)

    def save_formset(self, request, form, formset, change):
        if formset.model is not ApiKey:
            return super().save_formset(request, form, formset, change)
        # Nothing of a key is editable here; `revoke` goes through the service.
        formset.save(commit=False)
        for key_form in formset.forms:
            if key_form.cleaned_data.get("revoke") and key_form.instance.pk:
                api_key_revoke(key=key_form.instance)


# --- agents ------------------------------------------------------------------------------


class StatusFilter(admin.SimpleListFilter):
    """Status as seed 000 computes it, from the workload annotation and the paused flag."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [(status.value, status.label) for status in AgentStatus]

    def queryset(self, request, queryset):
        value = self.value()
        return with_status(queryset, value) if value in AgentStatus.values else queryset


class LoadFilter(admin.SimpleListFilter):
    """Who needs a manager: agents at capacity, offline agents with reports or queued work
    (the dashboard's `at_capacity` and `offline_with_work` link here)."""

    title = "needs a manager"
    parameter_name = "load"
    AT_CAPACITY = "at_capacity"
    OFFLINE_WITH_WORK = "offline_with_work"

    def lookups(self, request, model_admin):
        return [
            (self.AT_CAPACITY, "At capacity"),
            (self.OFFLINE_WITH_WORK, "Offline, with reports or queued work"),
        ]

    def queryset(self, request, queryset):
        if self.value() == self.AT_CAPACITY:
            return at_capacity(queryset)
        if self.value() == self.OFFLINE_WITH_WORK:
            return offline_with_work(queryset)
        return queryset


class HierarchyRoleFilter(admin.SimpleListFilter):
    title = "hierarchy role"
    parameter_name = "hierarchy_role"
    NONE = "none"

    def lookups(self, request, model_admin):
        return [(role.value, role.label) for role in HierarchyRole] + [
            (self.NONE, "No role (worker by default)")
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value == self.NONE:
            return queryset.filter(hierarchy_role__isnull=True)
        if value in HierarchyRole.values:
            return queryset.filter(hierarchy_role__role=value)
        return queryset


class AgentRoleInline(OrgScoped, admin.StackedInline):
    model = AgentRole
    org_path = "agent__organization"
    parent_org_path = "organization"
    can_delete = True
    max_num = 1
    extra = 1
    fields = ["role", "can_assign_to_peers", "can_escalate_to_supervisor"]
    verbose_name = "hierarchy role"
    verbose_name_plural = "hierarchy role (none = worker without peer assignment)"


class AllowedToolsField(forms.MultipleChoiceField):
    """A managed agent's allow-list, ticked from the registry's tools; none ticked = all (null).

    The choices are read when the form is built, so every app's tools are there and a name the
    registry does not know cannot be saved."""

    widget = forms.CheckboxSelectMultiple

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault(
            "help_text", "The tools a managed agent is offered. None ticked: every tool."
        )
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return value or []

    def clean(self, value):
        return super().clean(value) or None

    def has_changed(self, initial, data):
        return sorted(initial or []) != sorted(data or [])


class AgentForm(OrgUniqueNameForm):
    unique_in_org = "handle"
    expertise = ExpertiseField()
    webhook_url = forms.URLField(
        label="Webhook URL",
        required=False,
        assume_scheme="https",
        help_text="Optional: notified of new work (signed with the organization's secret).",
    )
    allowed_tools = AllowedToolsField()

    class Meta:
        model = Agent
        fields = [
            "organization", "handle", "name", "role", "team", "senior", "expertise",
            "is_paused", "workload_capacity", "availability_until", "system_prompt",
            "worktree_path", "webhook_url", "llm_provider", "llm_model", "llm_temperature",
            "llm_max_tokens", "runtime", "max_turns", "allowed_tools",
        ]  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = sorted(registry.REGISTRY)
        # A name saved earlier whose tool has since gone stays visible (and can be unticked).
        names += [n for n in (self.initial.get("allowed_tools") or []) if n not in names]
        self.fields["allowed_tools"].choices = [(n, n) for n in names]

    def clean_senior(self):
        senior = self.cleaned_data.get("senior")
        if senior is not None and self.instance.pk is not None and senior.pk == self.instance.pk:
            raise forms.ValidationError("An agent cannot be its own senior: choose someone else.")
        return senior

    def clean_allowed_tools(self):
        names = self.cleaned_data.get("allowed_tools")
        unknown = [n for n in names or [] if n not in registry.REGISTRY]
        if unknown:
            raise forms.ValidationError(f"Unknown tool(s): {', '.join(unknown)}.")
        return names


@admin.register(Agent)
class AgentAdmin(HistoryAdmin, OrgOwnedAdmin):
    form = AgentForm
    inlines = [AgentRoleInline]
    related_histories = [("Hierarchy role", "agent_role", "agent_id")]
    # One cell per question a manager asks: who, in what state, how loaded, doing what, where,
    # under whom, knowing what (the organization's column only for who sees several).
    list_display = [
        "agent_cell",
        "status_badge",
        "workload",
        "role_cell",
        "senior_name",
        "expertise_display",
    ]
    list_display_links = ["agent_cell"]
    list_select_related = ["organization", "team", "senior", "hierarchy_role"]
    list_filter = [
        ("team", ScopedRelatedFilter), StatusFilter, LoadFilter, HierarchyRoleFilter,
        ("runtime", HumanChoicesFilter),
    ]  # fmt: skip
    search_fields = ["name", "handle", "expertise"]
    autocomplete_fields = ["team", "senior"]
    actions = ["pause_agents", "resume_agents"]
    list_per_page = 100
    # Explicit: a GROUP BY (the workload annotation) drops Meta.ordering.
    ordering = ["handle"]
    fieldsets = [
        (
            None,
            {"fields": ["organization", "handle", "name", "role", "team", "senior", "expertise"]},
        ),
        ("Availability", {"fields": ["is_paused", "workload_capacity", "availability_until"]}),
        ("Prompt and integrations", {"fields": ["system_prompt", "worktree_path", "webhook_url"]}),
        (
            "LLM and runtime",
            {
                "description": "The LLM settings serve collaboration sessions and, for a "
                "managed agent, its runs (woken when work reaches it; see its runs below).",
                "fields": [
                    "runtime",
                    "llm_provider",
                    "llm_model",
                    "llm_temperature",
                    "llm_max_tokens",
                    "max_turns",
                    "allowed_tools",
                ],
            },
        ),
    ]

    def get_queryset(self, request):
        # The workload is derived from tasks: one annotated query for the whole page.
        return super().get_queryset(request).annotate(current_workload=workload_count())

    def get_readonly_fields(self, request, obj=None):
        readonly = tuple(super().get_readonly_fields(request, obj))
        # The id is the agent's identity in its tasks' audit trail: fixed once it exists (the
        # model refuses a changed one too, whatever the form posts).
        return readonly + ("handle",) if obj is not None else readonly

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if sees_several_organizations(request):
            columns.insert(1, "organization")
        return columns

    @admin.display(description="agent", ordering="name")
    def agent_cell(self, agent):
        managed = agent.runtime == AgentRuntime.MANAGED
        return format_html(
            '<strong>{}</strong><br><span class="quiet">{}</span>{}',
            agent.name,
            agent.handle,
            format_html(' <span class="quiet">· managed</span>') if managed else "",
        )

    @admin.display(description="job title · team", ordering="role")
    def role_cell(self, agent):
        role = getattr(agent, "hierarchy_role", None)
        below = [agent.team.name if agent.team_id else "no team"]
        if role is not None:
            below.append(human(role.role))
        return two_lines(agent.role or "—", " · ".join(below))

    @admin.display(description="reports to", ordering="senior__name")
    def senior_name(self, agent):
        if not agent.senior_id:
            return "—"
        return format_html('<span title="{}">{}</span>', agent.senior.handle, agent.senior.name)

    @admin.display(description="status")
    def status_badge(self, agent):
        status = status_for(
            is_paused=agent.is_paused,
            workload=agent.current_workload,
            capacity=agent.workload_capacity,
        )
        return badge(status, "agent", human(status))

    @admin.display(description="load", ordering="current_workload")
    def workload(self, agent):
        return f"{agent.current_workload}/{agent.workload_capacity}"

    @admin.display(description="expertise")
    def expertise_display(self, agent):
        return _expertise(agent.expertise)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        # Resumed or given room in the form: the same queue rule as the resume action.
        # Made managed: the service runs it from now on, starting with the work it holds.
        if change and {"is_paused", "workload_capacity", "runtime"} & set(form.changed_data):
            agent_room_changed(agent=obj)

    def save_formset(self, request, form, formset, change):
        if formset.model is not AgentRole:
            return super().save_formset(request, form, formset, change)
        # Through the REST door's services: a default supervisor that loses the supervisor
        # role stops being the default supervisor (with its audit row), however it lost it.
        formset.save(commit=False)
        agent = form.instance
        caller = caller_for_admin(request, agent.organization)
        if formset.deleted_objects:  # one role per agent
            role_delete(caller=caller, agent_id=agent.handle)
        for role in [*formset.new_objects, *(role for role, _ in formset.changed_objects)]:
            saved = role_set(
                caller=caller,
                data={
                    "agent_id": agent.handle,
                    "role": role.role,
                    "can_assign_to_peers": role.can_assign_to_peers,
                    "can_escalate_to_supervisor": role.can_escalate_to_supervisor,
                },
            )
            role.pk = saved["id"]

    def get_deleted_objects(self, objs, request):
        deleted = super().get_deleted_objects(objs, request)
        if not request.POST.get("post"):  # the confirmation page, single or bulk
            for agent in objs:
                held, queued = agent_open_work(agent=agent)
                if held or queued:
                    self.message_user(
                        request,
                        f"{agent} holds {held} task(s) and {queued} are queued for it: deleting "
                        "it escalates them (to its senior, else the default supervisor, else "
                        "humans), each recorded in the task's history.",
                        messages.WARNING,
                    )
        return deleted

    def delete_model(self, request, obj):
        """Through the service: its tasks are escalated, never left held by no one."""
        self._say_escalated(request, [self._delete(request, obj)])

    def delete_queryset(self, request, queryset):
        # Said once all are deleted: a refusal of a later agent undoes the earlier ones too.
        moved = [self._delete(request, agent) for agent in queryset.select_related("organization")]
        self._say_escalated(request, moved)

    @staticmethod
    def _delete(request, agent) -> int:
        return len(agent_delete(caller=caller_for_admin(request, agent.organization), agent=agent))

    def _say_escalated(self, request, moved: list[int]) -> None:
        if sum(moved):
            self.message_user(request, f"Escalated {sum(moved)} task(s) first.", messages.INFO)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as exc:  # the view's transaction rolled back: nothing was deleted
            self.message_user(request, exc.message, messages.ERROR)
            return redirect(reverse("admin:organization_agent_change", args=[object_id]))

    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            delete_selected, name, description = actions["delete_selected"]

            # All or nothing, and a refusal is a message, not a 500 (as `delete_view`).
            def delete_or_refuse(modeladmin, request, queryset):
                try:
                    with transaction.atomic():
                        return delete_selected(modeladmin, request, queryset)
                except DomainError as exc:
                    modeladmin.message_user(
                        request, f"Nothing was deleted: {exc.message}", messages.ERROR
                    )

            actions["delete_selected"] = (delete_or_refuse, name, description)
        return actions

    @admin.action(description="Pause selected agents (offline: they receive nothing)")
    def pause_agents(self, request, queryset):
        changed = agent_set_paused(agents=queryset, paused=True)
        self.message_user(request, f"Paused {changed} agent(s).", messages.SUCCESS)

    @admin.action(description="Resume selected agents")
    def resume_agents(self, request, queryset):
        changed = agent_set_paused(agents=queryset, paused=False)
        self.message_user(request, f"Resumed {changed} agent(s).", messages.SUCCESS)

    def changelist_view(self, request, extra_context=None):
        orgs = Organization.objects.order_by("name")
        ids = admin_org_ids(request)
        if ids is not None:
            orgs = orgs.filter(pk__in=ids)
        chosen = parse_id(request.GET.get("organization__id__exact"))
        if chosen is not None:
            orgs = orgs.filter(pk=chosen)
        extra_context = {
            **(extra_context or {}),
            "org_chart_links": [
                (org.name, reverse("admin:organization_organization_org_chart", args=[org.pk]))
                for org in orgs[:10]
            ],
        }
        return super().changelist_view(request, extra_context)


# --- teams, memberships, expertise groups, API keys --------------------------------------


class TeamForm(OrgUniqueNameForm):
    class Meta:
        model = Team
        fields = ["organization", "name"]


@admin.register(Team)
class TeamAdmin(OrgOwnedAdmin):
    form = TeamForm
    list_display = ["name", "agent_count"]
    search_fields = ["name"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(agent_total=count_of(Agent.objects.all(), "team"))
        )

    def get_list_display(self, request):
        if sees_several_organizations(request):
            return ["name", "organization", "agent_count"]
        return self.list_display

    def get_list_select_related(self, request):
        return ["organization"]

    @admin.display(description="agents", ordering="agent_total")
    def agent_count(self, team):
        url = reverse("admin:organization_agent_changelist")
        return format_html('<a href="{}?team__id__exact={}">{}</a>', url, team.pk, team.agent_total)


@admin.register(Membership)
class MembershipAdmin(OrgOwnedAdmin):
    list_display = ["user", "organization", "is_admin"]
    list_select_related = ["user", "organization"]
    search_fields = ["user__username", "user__email"]


class ExpertiseGroupForm(OrgUniqueNameForm):
    expertise = ExpertiseField()

    class Meta:
        model = ExpertiseGroup
        fields = ["organization", "name", "expertise"]


@admin.register(ExpertiseGroup)
class ExpertiseGroupAdmin(HistoryAdmin, OrgOwnedAdmin):
    form = ExpertiseGroupForm
    list_display = ["name", "organization", "expertise_display"]
    list_select_related = ["organization"]
    search_fields = ["name", "expertise"]

    @admin.display(description="expertise")
    def expertise_display(self, group):
        return _expertise(group.expertise)


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(HistoryAdmin, OrgOwnedAdmin):
    """Only the digest is stored; the plaintext is on the page that answers the creation, once."""

    list_display = [
        "name_cell",
        "holder",
        "prefix",
        "organization",
        "created_at",
        "last_used_at",
        "state",
    ]
    list_display_links = ["name_cell"]
    list_select_related = ["organization", "agent"]
    list_filter = [KeyStateFilter]
    search_fields = ["name", "prefix", "agent__handle"]
    autocomplete_fields = ["agent"]
    actions = ["revoke_keys"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["organization", "agent", "name"]
        return [
            "organization",
            "agent",
            "name",
            "prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return ["organization", "agent", "prefix", "created_at", "last_used_at", "revoked_at"]

    def has_delete_permission(self, request, obj=None):
        # Revoke, do not delete: the row is the record of who could call.
        return request.user.is_active and request.user.is_superuser

    @admin.display(description="name", ordering="name")
    def name_cell(self, key):
        return key.name or format_html('<span class="quiet">(no name) {}</span>', key.prefix)

    @admin.display(description="acts as", ordering="agent__handle")
    def holder(self, key):
        if key.agent_id is None:
            return format_html('<span class="quiet">{}</span>', "the organization")
        return two_lines(key.agent.name, breakable(key.agent.handle))

    @admin.display(description="state")
    def state(self, key):
        if key.revoked_at is None:
            colour = colour_of("agent", AgentStatus.IDLE)
            return format_html('<span style="color:{}">active</span>', colour)
        colour = colour_of("agent", AgentStatus.OFFLINE)
        return format_html('<span style="color:{}">revoked</span>', colour)

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(key=key)
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        # The service saves the form's row itself, so the admin goes on with the saved key.
        request._api_key_plaintext = api_key_issue(key=obj)

    def response_add(self, request, obj, post_url_continue=None):
        plaintext = getattr(request, "_api_key_plaintext", None)
        if plaintext is None:
            return super().response_add(request, obj, post_url_continue)
        # Post/redirect/get: a refresh of the page that shows the key must not make another one.
        # The key waits in the (server-side) session until that page takes it out, once.
        request.session[self._session_slot(obj.pk)] = plaintext
        return redirect(reverse("admin:organization_apikey_created", args=[obj.pk]))

    @staticmethod
    def _session_slot(pk) -> str:
        return f"organization.apikey.plaintext.{pk}"

    def get_urls(self):
        created = path(
            "<int:object_id>/created/",
            self.admin_site.admin_view(self.created_view),
            name="organization_apikey_created",
        )
        return [created, *super().get_urls()]

    def created_view(self, request, object_id: int):
        key = self.get_object(request, str(object_id))
        if key is None or not self.has_view_permission(request, key):
            raise Http404
        plaintext = request.session.pop(self._session_slot(key.pk), None)
        if plaintext is None:
            self.message_user(
                request,
                "This key was shown once, when it was made; make a new one if it was lost.",
                messages.WARNING,
            )
            return redirect(reverse("admin:organization_apikey_change", args=[key.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "key": key,
            "plaintext": plaintext,
        }
        response = TemplateResponse(request, "admin/organization/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response
