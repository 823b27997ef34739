"""Querysets compiled to SQL once, for the hottest reads.

Django compiles a queryset to SQL on every evaluation. For a read such as one agent by handle
that compilation (joins, annotations, GROUP BY) cost more CPU than the rest of the request
together (bench/api.py). A `PreparedQuery` builds its queryset once with a sentinel for each
value that varies, compiles it once per database alias, and then only swaps the values in.

PostgreSQL only: psycopg returns final Python values, so the rows need none of the ORM's
conversions. Elsewhere (SQLite) the queryset is built and run as usual.
"""

import threading
from collections.abc import Callable

from django.core.exceptions import EmptyResultSet
from django.db import connections, router
from django.db.models import QuerySet

# Values no real argument takes: an integer below any primary key, a string no handle can be.
INT = -(2**31) + 7
TEXT = "\x00agent-org-sentinel"


class PreparedQuery:
    def __init__(self, model, build: Callable[..., QuerySet], **sentinels):
        """`build(**values)` returns the queryset (a `values_list`) for those values;
        `sentinels` gives each argument a sentinel value of its type (INT, TEXT)."""
        self.model = model
        self.build = build
        self.sentinels = sentinels
        self._compiled: dict[str, tuple[str, list, dict[str, list[int]]]] = {}
        self._lock = threading.Lock()

    def _compile(self, alias: str):
        sql, params = self.build(**self.sentinels).query.sql_with_params()
        params = list(params)
        positions = {
            name: [i for i, param in enumerate(params) if param == sentinel]
            for name, sentinel in self.sentinels.items()
        }
        missing = [name for name, found in positions.items() if not found]
        if missing:
            raise ValueError(f"the query does not take {missing} as parameters")
        return sql, params, positions

    def rows(self, **values) -> list[tuple]:
        alias = router.db_for_read(self.model)
        connection = connections[alias]
        if connection.vendor != "postgresql":
            try:
                return list(self.build(**values))
            except EmptyResultSet:
                return []
        compiled = self._compiled.get(alias)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.setdefault(alias, self._compile(alias))
        sql, template, positions = compiled
        params = list(template)
        for name, at in positions.items():
            for i in at:
                params[i] = values[name]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()


class PreparedInstances(PreparedQuery):
    """A `PreparedQuery` of some fields of `model`, answered as instances of it: the fields not
    read are deferred (Django reads one on first use, with a query of its own).

    `build(**values)` returns the queryset (not its `values_list`: the columns are read in the
    model's field order, which `Model.from_db` needs, whatever order `fields` names them in).
    """

    def __init__(self, model, fields, build: Callable[..., QuerySet], **sentinels):
        wanted = set(fields)
        self.fields = tuple(f.attname for f in model._meta.concrete_fields if f.attname in wanted)
        super().__init__(model, lambda **values: build(**values).values_list(*self.fields),
                         **sentinels)  # fmt: skip

    def instances(self, **values) -> list:
        alias = router.db_for_read(self.model)
        return [self.model.from_db(alias, self.fields, row) for row in self.rows(**values)]
