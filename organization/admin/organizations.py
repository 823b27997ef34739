"""The organization's page: its team rule, teams, members, expertise groups and API keys inline."""

from django import forms
from django.contrib import admin, messages
from django.urls import path, reverse
from django.utils.html import format_html

from ..models import Agent, ApiKey, ExpertiseGroup, Membership, Organization, Team, TeamRule
from ..services import api_key_revoke, webhook_secret_rotate
from ..workload import count_of
from .chart import org_chart_view
from .forms import ExpertiseField
from .history import RelatedHistories
from .scoping import OrgScoped


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
