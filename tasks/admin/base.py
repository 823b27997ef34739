"""What every tasks admin shares: the scoping, the acting staff user, the words for states."""

from django.core.paginator import Paginator
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.timesince import timesince

from infrastructure.errors import DomainError
from organization.admin.display import STATUS_COLOURS, human
from organization.admin.scoping import OrgOwnedAdmin, sees_several_organizations
from organization.caller import caller_for_admin

from ..models import DeliveryStatus, TaskStatus
from ..rules import Actor
from ..sql import counted_or_estimated

# A list counts its rows exactly up to this many; past it, it shows the planner's estimate.
EXACT_COUNT_UP_TO = 10_000

STATUS_COLOURS["task"] = {
    TaskStatus.QUEUED: "#6c757d",
    TaskStatus.ASSIGNED: "#0d6efd",
    TaskStatus.IN_PROGRESS: "#0dcaf0",
    TaskStatus.BLOCKED: "#fd7e14",
    TaskStatus.COMPLETED: "#198754",
    TaskStatus.FAILED: "#dc3545",
    TaskStatus.CANCELLED: "#adb5bd",
    TaskStatus.ESCALATED: "#d63384",
}
STATUS_COLOURS["delivery"] = {
    DeliveryStatus.PENDING: "#6c757d",
    DeliveryStatus.DELIVERED: "#198754",
}


def admin_actor(request, organization) -> Actor:
    """The staff user acting in the admin, as the engine sees them (from the admin's Caller)."""
    return Actor.of(caller_for_admin(request, organization))


class MoveRefused(Exception):
    """The engine refused the move `save_model` asked for; the form is shown again with why."""

    def __init__(self, error: DomainError):
        super().__init__(error.message)
        self.error = error


class OrganizationColumn:
    """A list that names each row's organization when the user sees several."""

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if sees_several_organizations(request):
            columns.append("organization")
        return columns


class EstimatedCountPaginator(Paginator):
    """Pages of a list that may hold millions of rows: its count is exact up to
    EXACT_COUNT_UP_TO, estimated past it, so a page never reads every row to number itself."""

    @cached_property
    def count(self) -> int:
        return counted_or_estimated(self.object_list, exact_up_to=EXACT_COUNT_UP_TO)


class TasksAppAdmin(OrgOwnedAdmin):
    """Scoped like the organization's admins; nothing here is ever deleted (the audit trail).
    Lists count their rows as EstimatedCountPaginator does, and not the unfiltered total."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False

    def has_delete_permission(self, request, obj=None):
        return False


class AuditAdmin(TasksAppAdmin):
    """Written only by the services: listed and shown, never added or changed."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def state_words(state: dict | None) -> str:
    """An audit snapshot in words: "in progress, held by agent-alex", "queued for agent-sam"."""
    state = state or {}
    said = human(state.get("status")).lower() if state.get("status") else "nowhere"
    if state.get("assignee"):
        said += f", held by {state['assignee']}"
    if state.get("queued_for"):
        said += f", queued for {state['queued_for']}"
    return said


def ago(moment, now=None) -> str:
    """'3 hours', the largest unit only: a column a manager scans."""
    return timesince(moment, now or timezone.now(), depth=1) if moment else "—"
