"""The demo organization for the tests: `seed_demo` run once per test process, then copied.

`seed_demo` plays every demo story through the task services (~520 queries, ~0.5 s), and ~300
tests start from it. The first `demo_organization()` of a process runs the real `seed_demo` and
keeps the rows it added; each later one inserts the same rows again (same primary keys and
values, every timestamp moved forward by the time since, so "how long ago" stays what seed_demo
made it): on PostgreSQL in one statement (~5 ms), elsewhere in one transaction of a statement
per table. The database ends as `seed_demo` left it.

Whenever a copy could differ, it is not used and `seed_demo` runs instead: a `demo` organization
already exists, on-commit manifest refreshes are on (a copy saves no Agent, so it would write no
manifest), or the first run changed a table in a way the copy cannot repeat (a row that was
there changed or removed, a date, a reference to a row it did not make).
"""

import json
from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models, transaction
from django.utils import timezone

from organization.discovery.manifest import manifest_dir
from organization.models import Organization
from tasks.demo import seed_demo

SLUG = "demo"


@dataclass
class Copy:
    organization_pk: int
    made_at: datetime
    rows: list[tuple[type[models.Model], list[dict]]]
    # On PostgreSQL: the rows as one statement (an INSERT per table in data-modifying CTEs,
    # each reading its rows from one JSON document) and its parameters but the clock's move.
    statement: tuple[str, list] | None = None


_copy: Copy | None = None
_copyable = True


def demo_organization() -> Organization:
    """What `seed_demo(slug="demo")` returns, with the same rows in the database."""
    global _copy, _copyable
    if Organization.objects.filter(slug=SLUG).exists() or manifest_dir() is not None:
        return seed_demo(slug=SLUG)
    if _copy is not None:
        return _insert(_copy)
    if not _copyable:
        return seed_demo(slug=SLUG)
    before = _table_state()
    org = seed_demo(slug=SLUG)
    _copy = _take(before, org)
    _copyable = _copy is not None
    return org


def _models() -> list[type[models.Model]]:
    return [m for m in apps.get_models(include_auto_created=True) if m._meta.managed]


def _table_state() -> dict:
    """Every row of every table (the test database is all but empty when it is read)."""
    return {m: _rows(m) for m in _models()}


def _rows(model) -> dict:
    names = [f.attname for f in model._meta.concrete_fields]
    return {row[0]: row for row in model._base_manager.values_list("pk", *names)}


def _fields(model) -> list[models.Field]:
    return [f for f in model._meta.local_concrete_fields if not getattr(f, "generated", False)]


def _take(before: dict, org: Organization) -> Copy | None:
    rows, added = [], set()
    for model, old in before.items():
        now = _rows(model)
        if now == old:
            continue
        if any(now.get(pk) != row for pk, row in old.items()) or model._meta.parents:
            return None  # a row was changed or removed: a copy of the new rows would not repeat it
        new = list(model._base_manager.filter(pk__in=now.keys() - old.keys()).order_by("pk"))
        fields = _fields(model)
        values = [{f.attname: getattr(obj, f.attname) for f in fields} for obj in new]
        if any(
            isinstance(f, models.DateField)
            and not isinstance(f, models.DateTimeField)
            and any(v[f.attname] is not None for v in values)
            for f in fields
        ):
            return None
        rows.append((model, values))
        added.update((model._meta.concrete_model, obj.pk) for obj in new)
    for model, values in rows:
        for field in _fields(model):
            if not field.is_relation or not field.many_to_one and not field.one_to_one:
                continue
            target = field.related_model._meta.concrete_model
            for value in values:
                pk = value[field.attname]
                if pk is not None and (target, pk) not in added:
                    return None
    return Copy(
        organization_pk=org.pk, made_at=timezone.now(), rows=rows, statement=_statement(rows)
    )


# The statement's parameter that is the time since the copy was taken (filled in per insert).
_SHIFT = object()


class _Exact(DjangoJSONEncoder):
    """Timestamps to the microsecond (Django's encoder keeps milliseconds, as JavaScript)."""

    def default(self, o):
        return o.isoformat() if isinstance(o, datetime) else super().default(o)


def _statement(rows) -> tuple[str, list] | None:
    """All the rows in one INSERT statement, every timestamp plus a parameter (the clock's move):
    ~17 statements with a value prepared and adapted per column and row cost ~28 ms a test."""
    if connection.vendor != "postgresql" or not rows:
        return None
    qn = connection.ops.quote_name
    ctes, params = [], []
    for n, (model, values) in enumerate(rows):
        fields = _fields(model)
        table = qn(model._meta.db_table)
        selected = []
        for f in fields:
            if isinstance(f, models.DateTimeField):
                selected.append(f"v.{qn(f.column)} + %s::interval")
                params.append(_SHIFT)
            else:
                selected.append(f"v.{qn(f.column)}")
        document = [{f.column: row[f.attname] for f in fields} for row in values]
        ctes.append(
            f"i{n} AS (INSERT INTO {table} ({', '.join(qn(f.column) for f in fields)}) "
            f"SELECT {', '.join(selected)} FROM json_populate_recordset(NULL::{table}, %s) v)"
        )
        params.append(json.dumps(document, cls=_Exact))
    return f"WITH {', '.join(ctes)} SELECT 1", params


def _insert(copy: Copy) -> Organization:
    shift = timezone.now() - copy.made_at
    if copy.statement is not None:
        sql, params = copy.statement
        with connection.cursor() as cursor:
            cursor.execute(sql, [shift if p is _SHIFT else p for p in params])
        return Organization.objects.get(pk=copy.organization_pk)
    with transaction.atomic():
        for model, values in copy.rows:
            fields = _fields(model)
            moved = [
                model(**{k: v + shift if isinstance(v, datetime) else v for k, v in row.items()})
                for row in values
            ]
            # raw: the stored values as they are (no auto_now, no defaults), as loaddata does.
            model._base_manager._insert(moved, fields=fields, raw=True)
    return Organization.objects.get(pk=copy.organization_pk)
