"""The API key page: issue a key (its plaintext shown once), list and revoke keys."""

from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from ..models import AgentStatus, ApiKey
from ..services import api_key_issue, api_key_revoke
from .display import breakable, colour_of, two_lines
from .history import HistoryAdmin
from .scoping import OrgOwnedAdmin


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
