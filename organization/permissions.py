from rest_framework.permissions import BasePermission

from .caller import resolve_caller


class IsOrganizationCaller(BasePermission):
    """Any API key, or a logged-in admin member of an organization."""

    message = "Authenticate with 'Authorization: Bearer <key>' or log in as an admin member."

    def has_permission(self, request, view) -> bool:
        return resolve_caller(request) is not None
