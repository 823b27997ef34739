"""Webhook deliveries: read-only, with the outcome of each attempt."""

from django.contrib import admin

from organization import webhooks
from organization.admin.display import HumanChoicesFilter, badge, breakable, human

from ..models import WebhookDelivery
from .base import AuditAdmin


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AuditAdmin):
    list_display = [
        "created_at",
        "agent",
        "status_badge",
        "attempts",
        "response_status",
        "outcome",
        "address",
    ]
    list_filter = [("status", HumanChoicesFilter)]
    list_select_related = ["agent"]
    search_fields = ["agent__handle", "url"]
    # Not even as a read-only form field: the detail page shows every field it does not exclude.
    exclude = ["last_error"]

    def get_readonly_fields(self, request, obj=None):
        # Staff see the coarse outcome, never the stored error text (rows older than the
        # SSRF rule kept exception details that tell which internal ports answer).
        fields = [f for f in super().get_readonly_fields(request, obj) if f != "last_error"]
        return [*fields, "outcome"]

    @admin.display(description="URL", ordering="url")
    def address(self, delivery):
        return breakable(delivery.url)  # wraps after its slashes and dots, not inside a word

    @admin.display(description="outcome")
    def outcome(self, delivery):
        return webhooks.outcome_of(delivery.status, delivery.last_error)

    @admin.display(description="status", ordering="status")
    def status_badge(self, delivery):
        return badge(delivery.status, "delivery", human(delivery.status))
