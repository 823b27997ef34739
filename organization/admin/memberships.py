"""The membership page: which staff user administers which organization."""

from django.contrib import admin

from ..models import Membership
from .scoping import OrgOwnedAdmin


@admin.register(Membership)
class MembershipAdmin(OrgOwnedAdmin):
    list_display = ["user", "organization", "is_admin"]
    list_select_related = ["user", "organization"]
    search_fields = ["user__username", "user__email"]
