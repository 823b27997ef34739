"""The costs app's SQL: a metered call's reserve and settle on PostgreSQL as one statement each
(data-modifying CTEs, locking as the ORM path does), its vendor checks and prepared queries.
Other databases use the ORM path in metering.py; the tests run both on PostgreSQL.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Sum
from django.db.models.expressions import RawSQL

from infrastructure.prepared import INT, PreparedQuery
from tasks.models import Task

from .models import LIFETIME, MONEY_MAX, MONTHLY_SCOPES, Budget, UsageRecord, UsageState

MONTHLY = "(" + ", ".join(f"'{scope}'" for scope in MONTHLY_SCOPES) + ")"


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


# The budgets covering a call (`metering.Meter.covering`).
COVERING = """organization_id = %(org)s AND (
        scope = 'organization'
        OR (scope = 'team' AND team_id = %(team)s)
        OR (scope = 'agent' AND agent_id = %(agent)s)
        OR (scope = 'task' AND task_id = ANY(%(tasks)s::bigint[]))
        OR (scope = 'collaboration' AND session_id = %(session)s))"""

RESERVE = f"""
WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true)),
locked AS (
    SELECT id, limit_usd, reserved_usd,
           CASE WHEN scope IN {MONTHLY} AND period <> %(period)s THEN 0 ELSE spent_usd END AS spent
    FROM {{budget}}
    WHERE {COVERING}
    ORDER BY id
    FOR UPDATE
),
short AS (SELECT id FROM locked WHERE limit_usd - spent - reserved_usd < %(worst)s),
held AS (
    UPDATE {{budget}} b
    SET reserved_usd = b.reserved_usd + %(worst)s,
        spent_usd = CASE WHEN b.scope IN {MONTHLY} AND b.period <> %(period)s
                         THEN 0 ELSE b.spent_usd END,
        period = CASE WHEN b.scope IN {MONTHLY} THEN %(period)s ELSE b.period END,
        updated_at = now()
    FROM locked
    WHERE b.id = locked.id AND NOT EXISTS (SELECT 1 FROM short)
    RETURNING b.id
),
reservation AS (
    INSERT INTO {{usage}} (organization_id, agent_id, team_id, purpose, session_id, run_id,
        task_id, label, provider, model, prompt_tokens, completion_tokens, price_source,
        self_reported, state, reserved_usd, budget_ids, expires_at, error, created_at)
    SELECT %(org)s, %(agent)s, %(team)s, %(purpose)s, %(session)s, %(run)s, %(task)s,
        %(label)s, %(provider)s, %(model)s, 0, 0, %(price_source)s, false, 'reserved', %(worst)s,
        (SELECT to_jsonb(array_agg(id ORDER BY id)) FROM held),
        now() + make_interval(secs => %(expires_in)s), '', now()
    WHERE EXISTS (SELECT 1 FROM held)
    RETURNING id
)
SELECT (SELECT array_agg(id ORDER BY id) FROM locked),
       (SELECT array_agg(id ORDER BY id) FROM short),
       (SELECT id FROM reservation),
       (SELECT 1 FROM cfg)
"""

SETTLE = f"""
WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true)),
-- The budgets the reservation held, and those covering the call set since (not held: a new
-- budget's start skips calls under way, so it is booked here, as `metering.settle` says).
locked AS (
    SELECT id, id = ANY(%(budgets)s::bigint[]) AS held FROM {{budget}}
    WHERE id = ANY(%(budgets)s::bigint[]) OR ({COVERING})
    ORDER BY id
    FOR UPDATE
),
settled AS (
    UPDATE {{usage}}
    SET state = %(state)s, prompt_tokens = %(prompt)s, completion_tokens = %(completion)s,
        cost_usd = %(cost)s, input_usd_per_mtok = %(input_rate)s,
        output_usd_per_mtok = %(output_rate)s, error = %(error)s, settled_at = now()
    -- The budgets are locked first, as every writer of them and the ledger locks (the sweep's
    -- booking included): only referenced here is `locked` run before this row is updated.
    WHERE id = %(record)s AND state = 'reserved' AND (SELECT count(*) FROM locked) >= 0
    RETURNING id
),
booked AS (
    UPDATE {{budget}} b
    SET reserved_usd = GREATEST(b.reserved_usd - CASE WHEN locked.held THEN %(held)s ELSE 0 END, 0),
        -- saturates at the column's maximum rather than overflow it (metering.spend says why)
        spent_usd = CASE WHEN b.period IN (%(period)s, '{LIFETIME}')
                         THEN LEAST(b.spent_usd + %(booked)s, {MONEY_MAX}) ELSE %(booked)s END,
        period = CASE WHEN b.period = '{LIFETIME}' THEN b.period ELSE %(period)s END,
        updated_at = now()
    FROM locked
    WHERE b.id = locked.id AND EXISTS (SELECT 1 FROM settled)
    RETURNING b.id, b.organization_id, b.scope, b.team_id, b.agent_id, b.task_id, b.session_id,
              b.limit_usd, b.spent_usd, b.reserved_usd, b.period, b.warned_period,
              b.exhausted_period, b.refused_period
)
SELECT (SELECT count(*) FROM settled), b.* FROM (SELECT 1 FROM cfg) AS c(x)
LEFT JOIN booked b ON true
"""

BOOKED_FIELDS = [
    "id", "organization_id", "scope", "team_id", "agent_id", "task_id", "session_id", "limit_usd",
    "spent_usd", "reserved_usd", "period", "warned_period", "exhausted_period", "refused_period",
]  # fmt: skip


def reserve(params: dict) -> tuple[list[int], list[int], int | None]:
    """(the covering budgets' ids, those without room, the reservation's ledger id or None)."""
    sql = RESERVE.format(budget=_table(Budget), usage=_table(UsageRecord))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        locked, short, record_id, _ = cursor.fetchone()
    return list(locked or []), list(short or []), record_id


def settle(params: dict) -> tuple[bool, list[Budget]]:
    """(whether the reservation was still held and is now booked, the budgets as booked)."""
    sql = SETTLE.format(budget=_table(Budget), usage=_table(UsageRecord))
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "state": params.get("state", UsageState.RECORDED)})
        rows = cursor.fetchall()
    settled = bool(rows and rows[0][0])
    budgets = [
        Budget(**dict(zip(BOOKED_FIELDS, row[1:], strict=True)))
        for row in rows
        if row[1] is not None
    ]
    return settled, budgets


def may_run_alone() -> bool:
    """PostgreSQL, outside a transaction (a statement inside one would change its commit)."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def commit_without_waiting_for_disk() -> None:
    """PostgreSQL: this transaction's commit does not wait for its WAL to reach the disk (locks and
    checks are as with a synchronous commit; docs/costs.md says what a server crash can lose)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")


_PARENT_OF = PreparedQuery(
    Task,
    lambda task_id: Task.objects.filter(pk=task_id).order_by().values_list("parent_id"),
    task_id=INT,
)


def parent_of(task_id: int) -> int | None:
    """The task's parent id (None for a root or a missing task): one compiled statement."""
    return next((parent for (parent,) in _PARENT_OF.rows(task_id=task_id)), None)


_ANY_BUDGET = PreparedQuery(
    Budget,
    lambda organization_id: (
        Budget.objects.filter(organization_id=organization_id).order_by().values_list("pk")[:1]
    ),
    organization_id=INT,
)


def has_any_budget(organization_id: int) -> bool:
    """Whether the organization set any budget: one compiled statement."""
    return bool(_ANY_BUDGET.rows(organization_id=organization_id))


_TREE = """
    WITH RECURSIVE tree(id) AS (
        SELECT CAST(%s AS BIGINT)
        UNION ALL
        SELECT t.{pk} FROM {tasks} t JOIN tree ON t.parent_id = tree.id
    )
    SELECT id FROM tree
"""


def task_tree_ids(task_id: int) -> RawSQL:
    """The ids of the task and all its subtasks, as a subquery (a recursive CTE)."""
    tasks = Task._meta
    return RawSQL(_TREE.format(pk=tasks.pk.column, tasks=tasks.db_table), [task_id])


def task_tree_cost(task_id: int):
    """What the ledger booked for the task and all its subtasks (None: nothing), in one
    statement written once: the ORM's aggregate compiled on every task read (`get_task`)."""
    if connection.vendor != "postgresql":
        tree = task_tree_ids(task_id)
        return UsageRecord.objects.filter(task_id__in=tree).aggregate(total=Sum("cost_usd"))[
            "total"
        ]
    tasks, ledger = Task._meta, UsageRecord._meta
    tree = _TREE.format(pk=tasks.pk.column, tasks=tasks.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT SUM(cost_usd) FROM {ledger.db_table} WHERE task_id IN ({tree})",  # noqa: S608  (our names)
            [task_id],
        )
        return cursor.fetchone()[0]
