"""The admin's history pages: simple-history's, scoped like the rest of the admin, read-only.

`HistoryAdmin` goes first in an audited model's ModelAdmin bases; `related_histories` adds the
history of rows edited inline, as `(title, kind, lookup to this object's pk)`.
"""

from django.http import Http404, HttpResponseNotAllowed
from simple_history.admin import SimpleHistoryAdmin
from simple_history.template_utils import HistoricalRecordContextHelper

from infrastructure.inputs import parse_id

from ..history import AUDITED
from .scoping import admin_org_ids


class RelatedHistories:
    """The history of the rows edited inline on an object's page, below its own history."""

    related_histories: list[tuple[str, str, str]] = []
    history_list_per_page = 100

    def related_history_tables(self, pk: int | None) -> list[tuple[str, list]]:
        tables = []
        for title, kind, lookup in self.related_histories:
            history_model = AUDITED[kind]
            records = list(
                history_model.objects.filter(**{lookup: pk})
                .select_related("history_user")
                .order_by("-history_date", "-history_id")[: self.history_list_per_page]
            )
            for newer, older in zip(records, records[1:], strict=False):
                delta = newer.diff_against(older)
                helper = HistoricalRecordContextHelper(history_model.instance_type, newer)
                newer.history_delta_changes = helper.context_for_delta_changes(delta)
            tables.append((title, records))
        return tables

    def history_view(self, request, object_id, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "related_histories": self.related_history_tables(parse_id(object_id)),
        }
        return super().history_view(request, object_id, extra_context)


class HistoryAdmin(RelatedHistories, SimpleHistoryAdmin):
    object_history_list_template = "admin/organization/history_list.html"
    object_history_template = "admin/organization/object_history.html"

    def _history_visible(self, request, object_id) -> bool:
        """Whether the user may read this object's history: 404 otherwise, never 403."""
        pk = parse_id(object_id)
        if pk is None:
            return False
        if self.get_queryset(request).filter(pk=pk).exists():
            return True
        # A deleted object: its last row says whose it was.
        ids = admin_org_ids(request)
        rows = self.model.history.filter(**{self.model._meta.pk.attname: pk})
        last = rows.order_by("-history_date", "-history_id").first()
        if last is None:
            return False
        return ids is None or last.history_organization_id in ids

    def history_view(self, request, object_id, extra_context=None):
        if not self._history_visible(request, object_id):
            raise Http404
        return super().history_view(request, object_id, extra_context)

    def history_form_view(self, request, object_id, version_id, extra_context=None):
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        if not self._history_visible(request, object_id):
            raise Http404
        return super().history_form_view(request, object_id, version_id, extra_context)
