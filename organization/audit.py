"""The audit feed (`GET /api/audit`): who changed what in one organization, oldest first.

One union query over every audited model's history (history.py `AUDITED`), paginated; each row
described with its object, action, actor and fields before and after.
"""

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

from django.db.models import CharField, ForeignKey, OuterRef, QuerySet, Subquery, Value

from .history import AUDITED
from .models import Organization

ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}
# Bookkeeping that every save moves, and the tenant the feed is already scoped to.
UNLISTED = {"created_at", "updated_at", "organization"}


def audit_rows(*, org: Organization, since: datetime | None = None) -> QuerySet:
    """References (`history_date`, `kind`, `history_id`) of `org`'s historical rows of every
    audited model since `since` (inclusive), oldest first: one union query."""
    parts = []
    for kind, model in sorted(AUDITED.items()):
        rows = model.objects.filter(history_organization_id=org.pk)
        if since is not None:
            rows = rows.filter(history_date__gte=since)
        rows = rows.annotate(kind=Value(kind, output_field=CharField())).order_by()
        parts.append(rows.values("history_date", "kind", "history_id"))
    return parts[0].union(*parts[1:], all=True).order_by("history_date", "kind", "history_id")


def describe(refs) -> list[dict]:
    """The feed's entries for a page of `audit_rows` references, in their order."""
    by_kind = defaultdict(list)
    for ref in refs:
        by_kind[ref["kind"]].append(ref["history_id"])
    rows, previous = {}, {}
    for kind, ids in by_kind.items():
        model = AUDITED[kind]
        pk = model.instance_type._meta.pk.attname
        before = model.objects.filter(
            **{pk: OuterRef(pk)}, history_id__lt=OuterRef("history_id")
        ).order_by("-history_id")
        page = model.objects.filter(history_id__in=ids).annotate(
            previous_id=Subquery(before.values("history_id")[:1])
        )
        for row in page:
            rows[kind, row.history_id] = row
        earlier = model.objects.in_bulk([r.previous_id for r in page if r.previous_id])
        for row in page:
            previous[kind, row.history_id] = earlier.get(row.previous_id)
    labels = _foreign_labels(rows.values(), previous.values())
    entries = []
    for ref in refs:
        key = ref["kind"], ref["history_id"]
        entries.append(_entry(ref["kind"], rows[key], previous[key], labels))
    return entries


def _entry(kind: str, row, before, labels) -> dict:
    action = ACTIONS[row.history_type]
    if row.history_type == "+":
        before = None
    changes = _changes(row, before, labels)
    special = row.audit_action(row, before) if row.history_type == "~" else None
    return {
        "id": f"{kind}-{row.history_id}",
        "when": row.history_date,
        "model": kind,
        "object_id": str(getattr(row, row.instance_type._meta.pk.attname)),
        "object_label": row.history_object_label,
        "action": special or action,
        "who": {
            "kind": row.history_actor_kind,
            "label": row.history_actor_label or row.history_actor_kind,
            "key_prefix": row.history_actor_key_prefix or None,
        },
        "changes": changes,
    }


def _fields(row):
    pk = row.instance_type._meta.pk.name
    return [f for f in row.tracked_fields if f.name not in UNLISTED and f.name != pk]


def _changes(row, before, labels) -> list[dict]:
    """{field, before, after} for each field that differs; a deletion lists the values it had."""
    changes = []
    for field in _fields(row):
        new = _value(field, getattr(row, field.attname), labels)
        if row.history_type == "-":
            changes.append({"field": field.name, "before": new, "after": None})
            continue
        old = None if before is None else _value(field, getattr(before, field.attname), labels)
        if before is None and new in (None, "", [], {}):
            continue  # created: only the values it was given
        if before is None or old != new:
            changes.append({"field": field.name, "before": old, "after": new})
    return changes


def _value(field, value, labels):
    """A JSON value: durations in seconds, foreign keys as the object's public id."""
    if value is None:
        return None
    if isinstance(field, ForeignKey):
        return labels.get((field.related_model, value), value)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return int(seconds) if seconds == int(seconds) else seconds
    if isinstance(value, Decimal | UUID):
        return str(value)
    return value


def _foreign_labels(*row_sets) -> dict:
    """(model, pk) → the public id of the objects the rows point at: an agent's handle (the
    `id` of the API), else the primary key."""
    wanted = defaultdict(set)
    for rows in row_sets:
        for row in rows:
            if row is None:
                continue
            for field in _fields(row):
                value = getattr(row, field.attname)
                if isinstance(field, ForeignKey) and value is not None:
                    wanted[field.related_model].add(value)
    labels = {}
    for model, pks in wanted.items():
        if any(f.name == "handle" for f in model._meta.fields):
            for pk, handle in model._default_manager.filter(pk__in=pks).values_list("pk", "handle"):
                labels[model, pk] = handle
    return labels
