"""The organization's SQL: hand-written statements, prepared reads and vendor branches.

The domain modules (auth, selectors, roster, prompt) say what they read; this module says how
the hottest reads run. PostgreSQL takes the fast path; SQLite (`make run`) the ORM's.
"""

import functools
import weakref
from dataclasses import dataclass

from django.core.exceptions import EmptyResultSet
from django.db import connection, connections, router
from django.db.models import BooleanField, JSONField, Lookup, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from infrastructure import prepared
from infrastructure.prepared import PreparedQuery, PreparedQuerySet

from .models import Agent, ApiKey, Organization, TeamRule
from .workload import HELD_RELATION, agents_with_workload, held_counts, tasks_along

# --- API keys: one statement per request, nothing cached across requests ---------------------
#
# Every request reads its key, so the lookup is one statement on the unique index of `prefix` (no
# sort), written once per database connection: building it through the ORM on every request cost
# more than running it. Nothing is cached across requests, so a revoked key is refused by the very
# next one. It reads what requests use — the key, its organization and its agent — except the
# agent's custom system prompt and the key's and organization's bookkeeping, which Django loads on
# access, as for any deferred field (only the prompt builder reads the prompt).


@dataclass(frozen=True)
class _Part:
    """One model's share of the row: its fields read, in the model's order (`Model.from_db`),
    from `start`, and the converters the ORM would apply to them (position, converters, column)."""

    model: type
    names: list[str]
    start: int
    converting: list[tuple]

    def build(self, row, connection):
        values = list(row[self.start : self.start + len(self.names)])
        for position, converters, col in self.converting:
            for convert in converters:
                values[position] = convert(values[position], col, connection)
        return self.model.from_db(connection.alias, self.names, values)


_LOOKUP = (  # model, alias, fields not read
    (ApiKey, "k", ("name", "created_at")),
    (Organization, "o", ("webhook_secret", "created_at")),
    (Agent, "a", ("system_prompt",)),
)
_KEY_JOINS = ("organization", "agent", "prefix", "revoked_at")
_plans = weakref.WeakKeyDictionary()


def _plan(connection) -> tuple[str, list[_Part]]:
    """The statement and how to read its row, for this connection's backend (its converters
    decode JSON, and booleans and dates on SQLite)."""
    if (plan := _plans.get(connection)) is not None:
        return plan
    qn = connection.ops.quote_name
    columns, parts = [], []
    for model, alias, unread in _LOOKUP:
        fields = [f for f in model._meta.concrete_fields if f.name not in unread]
        converting = []
        for position, field in enumerate(fields):
            col = field.get_col(alias)
            converters = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            if converters:
                converting.append((position, converters, col))
        parts.append(_Part(model, [f.attname for f in fields], len(columns), converting))
        columns += [f"{alias}.{qn(f.column)}" for f in fields]
    key, org, agent = (qn(model._meta.db_table) for model, *_ in _LOOKUP)
    col = {name: qn(ApiKey._meta.get_field(name).column) for name in _KEY_JOINS}
    sql = (
        f"SELECT {', '.join(columns)} FROM {key} k "
        f"JOIN {org} o ON o.{qn(Organization._meta.pk.column)} = k.{col['organization']} "
        f"LEFT JOIN {agent} a ON a.{qn(Agent._meta.pk.column)} = k.{col['agent']} "
        f"WHERE k.{col['prefix']} = %s AND k.{col['revoked_at']} IS NULL"
    )
    plan = _plans[connection] = (sql, parts)
    return plan


def active_key(prefix: str) -> ApiKey | None:
    """The unrevoked key of `prefix` with its organization and agent, in one query."""
    connection = connections[router.db_for_read(ApiKey)]
    sql, (key_part, org_part, agent_part) = _plan(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    key = key_part.build(row, connection)
    key.organization = org_part.build(row, connection)
    key.agent = agent_part.build(row, connection) if key.agent_id is not None else None
    return key


# --- prepared reads: compiled once per process ----------------------------------------------


def _agent_api_columns(*, organization_id: int, handle: str) -> QuerySet:
    return (
        agents_with_workload(org=organization_id)
        .filter(handle=handle)
        .annotate(expertise_json=Cast("expertise", TextField()))
        .order_by()
        .values_list(*AGENT_API_COLUMNS)[:1]
    )


# The agents API's fields of one agent, in the order selectors.agent_for_api() unpacks them.
AGENT_API_COLUMNS = (
    "handle",
    "name",
    "role",
    "team__name",
    "team_id",
    "senior__handle",
    "expertise_json",
    "is_paused",
    "current_workload",
    "workload_capacity",
    "availability_until",
    "hierarchy_role__id",
    "hierarchy_role__role",
    "hierarchy_role__can_assign_to_peers",
    "hierarchy_role__can_escalate_to_supervisor",
    "runtime",
)


_AGENT_API_ROW = PreparedQuery(
    Agent, _agent_api_columns, organization_id=prepared.INT, handle=prepared.TEXT
)


def agent_api_rows(*, organization_id: int, handle: str) -> list[tuple]:
    """The row of `AGENT_API_COLUMNS` of the agent `handle` (none if absent)."""
    return _AGENT_API_ROW.rows(organization_id=organization_id, handle=handle)


# Read by every recommendation, rule check and named agent of a request.
_AGENT_NAMED = PreparedQuerySet(
    Agent,
    lambda organization_id, handle: Agent.objects.filter(
        organization_id=organization_id, handle=handle
    ).order_by()[:1],
    organization_id=prepared.INT,
    handle=prepared.TEXT,
)


def agent_named(*, organization_id: int, handle: str) -> list[Agent]:
    """The organization's agent `handle`, in a list of one (empty if there is none)."""
    return _AGENT_NAMED.instances(organization_id=organization_id, handle=handle)


_TEAM_RULE = PreparedQuerySet(
    TeamRule,
    lambda organization_id: (
        TeamRule.objects.filter(organization_id=organization_id)
        # The default supervisor is escalated to (recommendations show it with its team).
        .select_related("default_supervisor__team")
        .order_by("pk")[:1]
    ),
    organization_id=prepared.INT,
)


def team_rules(*, organization_id: int) -> list[TeamRule]:
    """The organization's saved team rule, if it has one, with its default supervisor."""
    return _TEAM_RULE.instances(organization_id=organization_id)


# The agent as it is now, with its team, senior, role, organization and workload: read for every
# prompt (each managed run, each context request).
_FRESH = PreparedQuerySet(
    Agent,
    lambda organization_id, agent_id: (
        agents_with_workload(org=organization_id).select_related("organization").filter(pk=agent_id)
    ),
    organization_id=prepared.INT,
    agent_id=prepared.INT2,
)


def fresh_agent(*, organization_id: int, agent_id: int) -> list[Agent]:
    """The agent as it is now, annotated with its workload (none if it is gone)."""
    return _FRESH.instances(organization_id=organization_id, agent_id=agent_id)


@functools.cache
def _one_workload() -> PreparedQuery:
    """One agent's count: every move that gives a task counts its target's."""
    tasks, _ = tasks_along(HELD_RELATION)
    return PreparedQuery(
        tasks.model, lambda agent_id: held_counts([agent_id]), agent_id=prepared.INT
    )


def held_count_rows(*, agent_id: int) -> list[tuple]:
    """`[(agent_id, tasks held)]`, empty when the agent holds none."""
    return _one_workload().rows(agent_id=agent_id)


# --- expertise: jsonb on PostgreSQL, json_each on SQLite -------------------------------------


@JSONField.register_lookup
class HoldsAnyOf(Lookup):
    """`<json array>__holds_any_of=[strings]` (PostgreSQL): the array holds one of the strings,
    exactly — jsonb's `?|` with the strings as one text[] parameter, however many they are (so a
    prepared statement serves any number of terms)."""

    lookup_name = "holds_any_of"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} ?| %s", [*lhs_params, list(self.rhs)]


def holds_expertise(terms: list[str]) -> Q:
    """Agents whose expertise list holds one of `terms` exactly (case-sensitive, seed 000).

    One SQL condition on every backend: jsonb's `?|` on PostgreSQL (`HoldsAnyOf`), json_each on
    SQLite (which has no JSON `contains` lookup). No terms match no agent.
    """
    if not terms:
        return Q(pk__in=[])
    if connection.vendor == "postgresql":
        return Q(expertise__holds_any_of=list(terms))
    table = connection.ops.quote_name(Agent._meta.db_table)
    marks = ", ".join(["%s"] * len(terms))
    holds = RawSQL(
        f"EXISTS (SELECT 1 FROM json_each({table}.expertise) WHERE json_each.value IN ({marks}))",
        list(terms),
        output_field=BooleanField(),
    )
    return Q(holds)


def expertise_terms(*, organization_id: int) -> list[str]:
    """Every distinct expertise term of the organization's agents, in one query."""
    table = connection.ops.quote_name(Agent._meta.db_table)
    if connection.vendor == "postgresql":
        statement = (
            f"SELECT DISTINCT jsonb_array_elements_text(expertise) FROM {table} "
            "WHERE organization_id = %s AND jsonb_typeof(expertise) = 'array'"
        )
    else:
        statement = (
            f"SELECT DISTINCT json_each.value FROM {table}, json_each({table}.expertise) "
            f"WHERE {table}.organization_id = %s AND json_type({table}.expertise) = 'array'"
        )
    with connection.cursor() as cursor:
        cursor.execute(statement, [organization_id])
        return [term for (term,) in cursor.fetchall() if isinstance(term, str)]


# --- rows without the ORM's conversion pass ---------------------------------------------------


def rows_of(qs: QuerySet) -> list[tuple]:
    """The query's rows. On PostgreSQL psycopg already returns the final Python values, so the
    rows are fetched on a plain cursor, skipping the ORM's per-row conversion pass (which only
    calls int() on the count there); other backends (SQLite's datetimes are text) keep it."""
    if connection.vendor != "postgresql":
        return list(qs)
    try:
        statement, params = qs.query.sql_with_params()
    except EmptyResultSet:  # a condition that matches nothing (no such term): no query to run
        return []
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


# --- the reporting line ----------------------------------------------------------------------


def reports_below(*, organization_id: int, agent_id: int, levels: int) -> set[int]:
    """The ids down the agent's reporting line, at most `levels` deep, in one statement
    whatever its depth."""
    table = connection.ops.quote_name(Agent._meta.db_table)
    # The depth bounds a cycle; DISTINCT keeps an agent reached at two depths once.
    statement = f"""
        WITH RECURSIVE line(id, depth) AS (
            SELECT id, 1 FROM {table} WHERE organization_id = %s AND senior_id = %s AND id <> %s
            UNION
            SELECT a.id, line.depth + 1 FROM {table} a JOIN line ON a.senior_id = line.id
            WHERE a.organization_id = %s AND a.id <> %s AND line.depth < %s
        )
        SELECT DISTINCT id FROM line
    """
    with connection.cursor() as cursor:
        cursor.execute(
            statement, [organization_id, agent_id, agent_id, organization_id, agent_id, levels]
        )
        return {pk for (pk,) in cursor.fetchall()}
