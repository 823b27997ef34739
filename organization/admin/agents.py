"""The agent page: who, in what state, how loaded, under whom; writes go through the services."""

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from infrastructure.errors import DomainError
from infrastructure.inputs import parse_id

from .. import registry, remote_a2a
from ..caller import caller_for_admin
from ..hierarchy import role_delete, role_set
from ..models import Agent, AgentRole, AgentRuntime, AgentStatus, HierarchyRole, Organization
from ..services import (
    agent_delete,
    agent_open_work,
    agent_room_changed,
    agent_set_paused,
    agent_take_card,
)
from ..workload import at_capacity, offline_with_work, status_for, with_status, workload_count
from .display import HumanChoicesFilter, badge, human, two_lines
from .forms import ExpertiseField, OrgUniqueNameForm, expertise_words
from .history import HistoryAdmin
from .scoping import (
    OrgOwnedAdmin,
    OrgScoped,
    ScopedRelatedFilter,
    admin_org_ids,
    sees_several_organizations,
)


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
    a2a_card_url = forms.URLField(
        label="A2A card URL",
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=Agent._meta.get_field("a2a_card_url").help_text,
    )

    class Meta:
        model = Agent
        fields = [
            "organization",
            "handle",
            "name",
            "role",
            "team",
            "senior",
            "expertise",
            "is_paused",
            "workload_capacity",
            "availability_until",
            "system_prompt",
            "worktree_path",
            "webhook_url",
            "llm_provider",
            "llm_model",
            "llm_temperature",
            "llm_max_tokens",
            "runtime",
            "max_turns",
            "allowed_tools",
            "a2a_card_url",
            "a2a_token_env",
        ]

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

    def clean(self):
        cleaned = super().clean()
        # A remote A2A agent's card is fetched and checked at every save; its skills are the
        # agent's expertise. A URL the outbound rule refuses is the model's error to report.
        url = cleaned.get("a2a_card_url")
        if (
            cleaned.get("runtime") == AgentRuntime.A2A
            and url
            and not self.has_error("a2a_card_url")
        ):
            try:
                remote_a2a.validate_card_url(url)
            except forms.ValidationError:
                return cleaned
            try:
                card = remote_a2a.fetch_card(url)
            except remote_a2a.CardRefused as exc:
                self.add_error("a2a_card_url", str(exc))
                cleaned["a2a_card_url"] = url  # the model's own checks read it: one error
                return cleaned
            cleaned["expertise"] = agent_take_card(self.instance, card)
        return cleaned


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
        ("team", ScopedRelatedFilter),
        StatusFilter,
        LoadFilter,
        HierarchyRoleFilter,
        ("runtime", HumanChoicesFilter),
    ]
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
        (
            "Remote A2A agent",
            {
                "description": "For the runtime “remote A2A agent”: its tasks are sent to the A2A "
                "agent of this card (docs/a2a.md, Remote A2A agents); its skills become the "
                "expertise above.",
                "fields": ["a2a_card_url", "a2a_token_env", "a2a_card_summary"],
            },
        ),
    ]

    def get_queryset(self, request):
        # The workload is derived from tasks: one annotated query for the whole page.
        return super().get_queryset(request).annotate(current_workload=workload_count())

    def get_readonly_fields(self, request, obj=None):
        readonly = (*super().get_readonly_fields(request, obj), "a2a_card_summary")
        if not request.user.is_superuser:
            readonly += ("a2a_token_env",)  # TOKEN_ENV_SUPERUSER_ONLY
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
        runs = {AgentRuntime.MANAGED: "managed", AgentRuntime.A2A: "remote A2A"}
        runtime = runs.get(agent.runtime)
        return format_html(
            '<strong>{}</strong><br><span class="quiet">{}</span>{}',
            agent.name,
            agent.handle,
            format_html(' <span class="quiet">· {}</span>', runtime) if runtime else "",
        )

    @admin.display(description="card as fetched")
    def a2a_card_summary(self, agent):
        card = agent.a2a_card if agent is not None else None
        if not card:
            return "—"
        interfaces = ", ".join(
            f"{i.get('protocolBinding', '?')} {i.get('url', '')}"
            for i in card.get("supportedInterfaces", [])
        )
        return format_html(
            '<strong>{}</strong> {}<br>{}<br><span class="quiet">fetched {}</span>',
            card.get("name", ""),
            card.get("version", ""),
            interfaces,
            agent.a2a_card_fetched_at,
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
        return expertise_words(agent.expertise)

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
            role.pk = saved.pk

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
