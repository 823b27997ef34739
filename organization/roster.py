"""Seed 000's `get_organization_roster`: one service behind REST and the tool registry.

One SQL query whatever the organization's size and filter: the database computes the filter,
the workload and the status, and the rows come back as tuples.
"""

import functools

import orjson
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from infrastructure.errors import Invalid

from . import sql
from .models import Agent, Organization
from .workload import AVAILABLE, status_condition, status_expression, workload_count

ROSTER_FILTERS = ("all", "my_team", "available", "by_expertise")
# How `expertise` is compared: exact (seed 000's, case-sensitive) or ignoring case.
EXACT, IGNORE_CASE = "exact", "ignore_case"
EXPERTISE_MATCHES = (EXACT, IGNORE_CASE)

# The query's columns, in the order get_roster() unpacks them.
_COLUMNS = (
    "pk",
    "handle",
    "name",
    "role",
    "team__name",
    "senior__handle",
    "expertise_json",
    "computed_status",
    "current_workload",
    "workload_capacity",
    "availability_until",
)
_EXPERTISE_JSON = _COLUMNS.index("expertise_json")


def _check(*, agent: Agent | None, filter: str, expertise: str | None, expertise_match: str):
    if filter not in ROSTER_FILTERS:
        raise Invalid(
            f"Unknown filter '{filter}'. Use one of: {', '.join(ROSTER_FILTERS)}.", "invalid_filter"
        )
    if filter == "by_expertise" and not expertise:
        raise Invalid("filter 'by_expertise' requires the 'expertise' parameter.", "invalid_filter")
    if expertise_match not in EXPERTISE_MATCHES:
        raise Invalid(f"expertise_match must be '{EXACT}' or '{IGNORE_CASE}'.", "invalid_filter")
    if filter == "my_team" and agent is None:
        raise Invalid("filter 'my_team' needs an agent: pass ?agent=<id>.", "invalid_filter")


def _terms_matching(*, org: Organization, expertise: str, expertise_match: str) -> list[str]:
    """The exact terms to look for: `expertise` itself, or (ignore_case) every term of the
    organization equal to it under str.casefold — SQL's lower() is not casefold (ß, and on
    SQLite anything beyond ASCII), so the folding stays in Python, over the few distinct terms."""
    if expertise_match == EXACT:
        return [expertise]
    wanted = expertise.casefold()
    return [
        term for term in sql.expertise_terms(organization_id=org.pk) if term.casefold() == wanted
    ]


def _condition(
    *, org: Organization, agent: Agent | None, filter: str, expertise: str, expertise_match: str
) -> Q | None:
    """Which colleagues `filter` keeps, as SQL (None: everyone)."""
    if filter == "my_team":
        return Q(team_id=agent.team_id) if agent.team_id is not None else Q(pk__in=[])
    if filter == "available":
        return status_condition(AVAILABLE)
    if filter == "by_expertise":
        terms = _terms_matching(org=org, expertise=expertise, expertise_match=expertise_match)
        return sql.holds_expertise(terms)
    return None


@functools.cache
def _roster_columns() -> QuerySet:
    """`_COLUMNS` over every agent, ordered by handle; roster_queryset() scopes a clone to one
    organization. Built once per process: resolving these annotations is the dearest Python of
    a large roster."""
    return (
        Agent.objects.annotate(
            current_workload=workload_count(),
            computed_status=status_expression(),
            # JSONField would json.loads each row: the text is decoded all at once (_decode_all).
            expertise_json=Cast("expertise", TextField()),
        )
        .order_by("handle")
        .values_list(*_COLUMNS)
    )


def roster_queryset(
    *,
    org: Organization,
    agent: Agent | None,
    filter: str = "all",
    expertise: str | None = None,
    expertise_match: str = EXACT,
) -> QuerySet:
    """The roster's one query: the rows of `_COLUMNS`, ordered by handle — the colleagues the
    filter keeps, and the requester's own row (its agent_context) whatever the filter."""
    _check(agent=agent, filter=filter, expertise=expertise, expertise_match=expertise_match)
    qs = _roster_columns().filter(organization=org)
    keep = _condition(
        org=org, agent=agent, filter=filter, expertise=expertise, expertise_match=expertise_match
    )
    if keep is not None and agent is not None:
        keep |= Q(pk=agent.pk)  # the requester's own row, its agent_context, whatever the filter
    if keep is not None:
        qs = qs.filter(keep)
    return qs


def _decode_all(texts: list[str]) -> list:
    """Each row's expertise JSON text, decoded in one orjson call (JSONField would json.loads
    each row)."""
    return orjson.loads("[" + ",".join(texts) + "]")


def get_roster(
    *,
    org: Organization,
    agent: Agent | None,
    filter: str = "all",
    expertise: str | None = None,
    expertise_match: str = EXACT,
) -> dict:
    """`{"agent_context", "colleagues"}` for `agent` (None: a human's view of everyone)."""
    qs = roster_queryset(
        org=org,
        agent=agent,
        filter=filter or "all",
        expertise=expertise,
        expertise_match=expertise_match,
    )
    rows = sql.rows_of(qs)
    expertises = _decode_all([row[_EXPERTISE_JSON] for row in rows])
    everyone = []
    for row, terms in zip(rows, expertises, strict=True):
        _pk, handle, name, role, team, senior, _text, status, workload, capacity, until = row
        everyone.append(
            {
                "id": handle,
                "name": name,
                "role": role,
                "team": team,
                "seniorId": senior,
                "expertise": terms,
                "status": status,
                "current_workload": workload,
                "workload_capacity": capacity,
                "availability_until": until,
            }
        )
    my_pk = agent.pk if agent is not None else None
    mine = next((i for i, row in enumerate(rows) if row[0] == my_pk), None)
    me = everyone.pop(mine) if mine is not None else None
    return {"agent_context": me, "colleagues": everyone}
