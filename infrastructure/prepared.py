"""Querysets compiled to SQL once, for the hottest reads.

Django compiles a queryset to SQL on every evaluation. For a read such as one agent by handle
that compilation (joins, annotations, GROUP BY) cost more CPU than the rest of the request
together (bench/api.py). A `PreparedQuery` builds its queryset once with a sentinel for each
value that varies, compiles it once per database alias, and then only swaps the values in.

PostgreSQL only. Elsewhere (SQLite) the queryset is built and run as usual.
"""

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.lookups import DataContains
from django.core.exceptions import EmptyResultSet
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, router, transaction
from django.db.models import BigIntegerField, F, Func, Lookup, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, Upper
from django.db.models.query import get_related_populators
from django.db.models.signals import post_save, pre_save

# Values no real argument takes: integers below any primary key (one per argument of a query:
# their positions among the parameters tell the arguments apart), a string no handle can be.
INT = -(2**31) + 7
INT2 = INT + 1
INT3 = INT + 2
TEXT = "\x00agent-org-sentinel"


# An array of ids (primary and foreign keys are bigint).
ID_ARRAY = ArrayField(BigIntegerField())


class EqualsAny(Lookup):
    """`lhs = ANY(rhs)`, rhs an array: a parameter, or a subquery selecting one (PostgreSQL). Cast,
    so that PostgreSQL reads a subquery as the one array it selects, not as a set of rows."""

    lookup_name = "equals_any"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        cast = self.rhs.output_field.db_type(connection)
        return f"{lhs} = ANY(CAST({rhs} AS {cast}))", [*lhs_params, *rhs_params]


@contextmanager
def planned_for_values(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Within, the connection prepares no statement and uses none it prepared (psycopg's
    `prepare_threshold` None): each is planned for its values.

    A prepared statement is planned for its values five times, then PostgreSQL may keep a
    generic plan, made without them. For a search that is a plan for any pattern: the tasks
    list's then read an organization's newest tasks until a page matched (the whole organization
    for a rare word) instead of the few rows the trigram indexes give.
    """
    db = connections[using]
    if db.vendor != "postgresql":
        yield
        return
    db.ensure_connection()
    raw = db.connection
    saved = raw.prepare_threshold
    raw.prepare_threshold = None
    try:
        yield
    finally:
        raw.prepare_threshold = saved


def quoted_in_json_text(field: str, text: str) -> Q:
    """A condition implied by `field` (JSON) holding `"text"` in its JSON text, case aside
    (`field__icontains='"text"'`), for a quote-free `text`: in PostgreSQL, the text cut at its
    quotes has UPPER(text) among its pieces — an expression a GIN index can hold, and which
    reads the few rows naming `text` (tasks.sql's `task_chain_names`, of the delegation chain).
    None elsewhere, or for a `text` with a quote. AND it with the match itself.
    """
    if connection.vendor != "postgresql" or '"' in text:
        return Q()
    pieces = Func(
        Upper(Cast(field, TextField())),
        template="string_to_array(%(expressions)s, '\"')",
        output_field=ArrayField(TextField()),
    )
    wanted = Func(
        Upper(Value(text, output_field=TextField())),
        template="ARRAY[%(expressions)s]",
        output_field=ArrayField(TextField()),
    )
    return Q(DataContains(pieces, wanted))


def among(field: str, ids) -> Q:
    """`field IN ids`, on PostgreSQL as one array parameter (`= ANY(…)`): one statement whatever
    the number of ids, so a `PreparedQuery` compiles it once (its sentinel `[INT]`) and
    PostgreSQL prepares it once; `__in` elsewhere."""
    if connection.vendor != "postgresql":
        return Q(**{f"{field}__in": list(ids)})
    return Q(EqualsAny(F(field), Value(list(ids), output_field=ID_ARRAY)))


class PreparedQuery:
    def __init__(self, model, build: Callable[..., QuerySet], **sentinels):
        """`build(**values)` returns the queryset (a `values_list`) for those values;
        `sentinels` gives each argument a sentinel value of its type (INT, TEXT)."""
        self.model = model
        self.build = build
        self.sentinels = sentinels
        self._compiled: dict[str, tuple | _CompiledModels] = {}
        self._lock = threading.Lock()

    def _compile(self, alias: str):
        sql, params = self.build(**self.sentinels).query.sql_with_params()
        return sql, *self._positions(params)

    def _positions(self, params) -> tuple[list, dict[str, list[int]]]:
        """The parameters, and where each argument goes among them. A text sentinel inside a
        parameter is a LIKE pattern's (`contains`, `icontains`: `%"<handle>"%`), its value
        escaped as Django escapes one."""
        params = list(params)
        positions = {
            name: [
                i
                for i, param in enumerate(params)
                if param == sentinel
                or (isinstance(sentinel, str) and isinstance(param, str) and sentinel in param)
            ]
            for name, sentinel in self.sentinels.items()
        }
        missing = [name for name, found in positions.items() if not found]
        if missing:
            raise ValueError(f"the query does not take {missing} as parameters")
        return params, positions

    def _compiled_for(self, alias: str):
        compiled = self._compiled.get(alias)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.setdefault(alias, self._compile(alias))
        return compiled

    def _params(self, connection, template: list, positions: dict, values: dict) -> list:
        params = list(template)
        for name, at in positions.items():
            sentinel, value = self.sentinels[name], values[name]
            for i in at:
                if params[i] == sentinel:
                    params[i] = value
                else:
                    like = connection.ops.prep_for_like_query(value)
                    params[i] = params[i].replace(sentinel, like)
        return params

    def _as_usual(self, values: dict) -> list:
        """Elsewhere than on PostgreSQL: the queryset built and run as usual."""
        try:
            return list(self.build(**values))
        except EmptyResultSet:
            return []

    def rows(self, **values) -> list[tuple]:
        """The rows as psycopg returns them (no ORM converters: read no JSON column this way)."""
        alias = router.db_for_read(self.model)
        connection = connections[alias]
        if connection.vendor != "postgresql":
            return self._as_usual(values)
        sql, template, positions = self._compiled_for(alias)
        with connection.cursor() as cursor:
            cursor.execute(sql, self._params(connection, template, positions, values))
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
        super().__init__(
            model, lambda **values: build(**values).values_list(*self.fields), **sentinels
        )

    def instances(self, **values) -> list:
        alias = router.db_for_read(self.model)
        return [self.model.from_db(alias, self.fields, row) for row in self.rows(**values)]


class PreparedQuerySet(PreparedQuery):
    """A `PreparedQuery` answered as its queryset would answer: model instances of all their
    fields, with the objects its `select_related` names — Django's `ModelIterable` over SQL
    compiled once (the converters of its columns, JSON for one, found once too).

    `build(**values)` returns the queryset itself (annotations included). A sentinel may be a
    list (`[TEXT]`) for an argument that is one array parameter.
    """

    def _compile(self, alias: str):
        queryset = self.build(**self.sentinels)
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        if queryset._known_related_objects:
            raise ValueError("a PreparedQuerySet of a related manager is not supported")
        params, positions = self._positions(params)
        select, klass_info = compiler.select, compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        converters = compiler.get_converters([s[0] for s in select[0 : compiler.col_count]])
        return _CompiledModels(
            sql=sql,
            params=params,
            positions=positions,
            converters=list(converters.items()),
            model=klass_info["model"],
            init_list=[column[0].target.attname for column in select[start:end]],
            span=slice(start, end),
            populators=get_related_populators(klass_info, select, alias),
            annotations=list((compiler.annotation_col_map or {}).items()),
        )

    def instances(self, **values) -> list:
        alias = router.db_for_read(self.model)
        connection = connections[alias]
        if connection.vendor != "postgresql":
            return self._as_usual(values)
        c = self._compiled_for(alias)
        with connection.cursor() as cursor:
            cursor.execute(c.sql, self._params(connection, c.params, c.positions, values))
            rows = cursor.fetchall()
        found = []
        for row in rows:
            row = list(row)
            for position, (converters, expression) in c.converters:
                value = row[position]
                for converter in converters:
                    value = converter(value, expression, connection)
                row[position] = value
            obj = c.model.from_db(alias, c.init_list, row[c.span])
            for populator in c.populators:
                populator.populate(row, obj)
            for name, position in c.annotations:
                setattr(obj, name, row[position])
            found.append(obj)
        return found


@dataclass(frozen=True)
class _CompiledModels:
    sql: str
    params: list
    positions: dict[str, list[int]]
    converters: list  # (position, (converters, expression)), as the compiler's apply_converters
    model: type
    init_list: list[str]
    span: slice  # the model's own columns in a row
    populators: list  # the select_related objects' RelatedPopulators
    annotations: list  # (attribute, position) of each annotation, as the queryset sets them


# Fields whose `pre_save` reads the attribute and whose `get_db_prep_save` returns a value of
# one type as it is: `column_values` passes such a value (or None) straight through.
_AS_IS = {
    models.CharField: str,
    models.TextField: str,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.SmallIntegerField: int,
    models.AutoField: int,
    models.BigAutoField: int,
    models.BooleanField: bool,
}


@functools.cache
def _as_is(field) -> type | None:
    """The type of value `field` saves as it is (exactly its class: a subclass such as an
    EmailField may prepare its values), or None."""
    if isinstance(field, models.ForeignKey):
        return _as_is(field.target_field)
    return _AS_IS.get(type(field))


def column_values(obj, fields, *, add: bool, connection) -> list | None:
    """The parameters of `fields` of `obj` as `Model.save()` prepares them (`pre_save`: auto_now
    and auto_now_add; `get_db_prep_save`), None if a value is an expression (only `save()` can
    write one). A value of the type its field saves as it is (`_as_is`) is taken as it is."""
    values = []
    for field in fields:
        plain = _as_is(field)
        if plain is not None:
            value = getattr(obj, field.attname)
            if value is None or type(value) is plain:
                values.append(value)
                continue
        value = field.pre_save(obj, add=add)
        if hasattr(value, "resolve_expression"):
            return None
        values.append(field.get_db_prep_save(value, connection))
    return values


_UPDATES: dict[type, tuple[str, list]] = {}


def _compiled_write_connection(obj, *, new: bool):
    """The connection `obj` is written on when a statement compiled once may write it: on
    PostgreSQL, a row not saved yet and with no primary key (`new`) or one read from the
    database (not `new`), of a model whose save sends no signal anyone listens to; None
    otherwise (`save()` writes it)."""
    model = type(obj)
    connection = connections[router.db_for_write(model, instance=obj)]
    if (
        connection.vendor != "postgresql"
        or obj._state.adding != new
        or (new and obj.pk is not None)
        or pre_save.has_listeners(model)
        or post_save.has_listeners(model)
    ):
        return None
    return connection


def _written_fields(model) -> list:
    return [f for f in model._meta.local_concrete_fields if not (f.primary_key or f.generated)]


def save_existing(obj) -> None:
    """`obj.save()` for a row read from the database, by one UPDATE of all its columns compiled
    once per model: Django compiles that statement on every save (a fifth of a move's CPU).
    Values are prepared as `save()` prepares them (`pre_save`: auto_now; `get_db_prep_save`).
    Anything else — another database, a new row, a value that is an expression, a model whose
    save sends signals someone listens to — is saved by `save()` itself."""
    model = type(obj)
    connection = _compiled_write_connection(obj, new=False)
    if connection is None:
        obj.save()
        return
    compiled = _UPDATES.get(model)
    if compiled is None:
        meta, qn, fields = model._meta, connection.ops.quote_name, _written_fields(model)
        sets = ", ".join(f"{qn(f.column)} = %s" for f in fields)
        sql = f"UPDATE {qn(meta.db_table)} SET {sets} WHERE {qn(meta.pk.column)} = %s"  # noqa: S608  (our names)
        compiled = _UPDATES.setdefault(model, (sql, fields))
    sql, fields = compiled
    params = column_values(obj, fields, add=False, connection=connection)
    if params is None:
        obj.save()
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, obj.pk])
        if cursor.rowcount != 1:
            raise model.DoesNotExist(f"{model.__name__} {obj.pk} is gone: nothing was saved.")


_INSERTS: dict[type, tuple[str, list]] = {}


def insert_new(obj):
    """`obj.save()` for a new row, by one INSERT of all its columns compiled once per model (the
    runtime's wake-ups write a trigger, and sometimes a run, on every move that reaches a
    managed agent; the ledger a row per model call). As `save_existing`: values prepared as
    `save()` prepares them, and anything else — another database, a row with a primary key set,
    an expression, a model whose save sends signals someone listens to — saved by `save()`
    itself. Returns `obj`, saved."""
    model = type(obj)
    connection = _compiled_write_connection(obj, new=True)
    if connection is None:
        obj.save()
        return obj
    compiled = _INSERTS.get(model)
    if compiled is None:
        meta, qn, fields = model._meta, connection.ops.quote_name, _written_fields(model)
        columns = ", ".join(qn(f.column) for f in fields)
        marks = ", ".join(["%s"] * len(fields))
        sql = (
            f"INSERT INTO {qn(meta.db_table)} ({columns}) VALUES ({marks}) "  # noqa: S608  (our names)
            f"RETURNING {qn(meta.pk.column)}"
        )
        compiled = _INSERTS.setdefault(model, (sql, fields))
    sql, fields = compiled
    params = column_values(obj, fields, add=True, connection=connection)
    if params is None:
        obj.save()
        return obj
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        obj.pk = cursor.fetchone()[0]
    obj._state.adding, obj._state.db = False, connection.alias
    return obj


_UPDATES_WHERE: dict[tuple, tuple[str, list, list]] = {}


def update_where(model, where: dict, /, **values) -> int:
    """`model.objects.filter(**where).update(**values)` by a statement compiled once per model and
    names (Django compiles an update on every call): `where` by equality, `name__in` as one array
    parameter; `values` plain values, prepared as `update()` prepares them. Elsewhere than on
    PostgreSQL, or with an expression among the values, the queryset's own update."""
    connection = connections[router.db_for_write(model)]
    if connection.vendor != "postgresql" or any(
        hasattr(v, "resolve_expression") for v in values.values()
    ):
        return model._default_manager.filter(**where).update(**values)
    key = (model, tuple(where), tuple(values))
    compiled = _UPDATES_WHERE.get(key)
    if compiled is None:
        compiled = _UPDATES_WHERE.setdefault(key, _compile_update(model, where, values, connection))
    sql, set_fields, where_fields = compiled
    params = [
        f.get_db_prep_save(v, connection) for f, v in zip(set_fields, values.values(), strict=True)
    ]
    for (field, many), value in zip(where_fields, where.values(), strict=True):
        if many:
            params.append([field.get_db_prep_value(v, connection) for v in value])
        else:
            params.append(field.get_db_prep_value(value, connection))
    with transaction.mark_for_rollback_on_error(using=connection.alias):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount


def _compile_update(model, where: dict, values: dict, connection) -> tuple[str, list, list]:
    meta, qn = model._meta, connection.ops.quote_name
    set_fields = [meta.get_field(name) for name in values]
    where_fields, conditions = [], []
    for name in where:
        field_name, _, lookup = name.partition("__")
        if lookup not in ("", "in"):
            raise ValueError(f"update_where takes equality and __in, not {name}")
        field = meta.pk if field_name == "pk" else meta.get_field(field_name)
        many = lookup == "in"
        where_fields.append((field, many))
        conditions.append(f"{qn(field.column)} = ANY(%s)" if many else f"{qn(field.column)} = %s")
    sets = ", ".join(f"{qn(f.column)} = %s" for f in set_fields)
    sql = f"UPDATE {qn(meta.db_table)} SET {sets} WHERE {' AND '.join(conditions)}"  # noqa: S608  (our names)
    return sql, set_fields, where_fields
