"""Seed 000's `get_organization_roster`: one service behind REST and the tool registry.

Built from one `.values()` query whatever the organization's size, so that it stays
within a small factor of the bare query (bench/roster.py measures it).
"""

from .errors import Invalid
from .models import Agent, Organization
from .selectors import agents_of
from .workload import AVAILABLE_STATUSES, status_for, workload_count

ROSTER_FILTERS = ("all", "my_team", "available", "by_expertise")
# How `expertise` is compared: exact (seed 000's, case-sensitive) or ignoring case.
EXACT, IGNORE_CASE = "exact", "ignore_case"
EXPERTISE_MATCHES = (EXACT, IGNORE_CASE)

_ROW_FIELDS = (
    "pk",
    "handle",
    "name",
    "role",
    "team_id",
    "team__name",
    "senior__handle",
    "expertise",
    "is_paused",
    "workload_capacity",
    "availability_until",
)


def roster_rows(*, org: Organization) -> list[dict]:
    rows = agents_of(org=org).values(*_ROW_FIELDS, workload=workload_count()).order_by("handle")
    return list(rows)


def _colleague(row: dict) -> dict:
    return {
        "id": row["handle"],
        "name": row["name"],
        "role": row["role"],
        "team": row["team__name"],
        "seniorId": row["senior__handle"],
        "expertise": row["expertise"],
        "status": status_for(
            is_paused=row["is_paused"],
            workload=row["workload"],
            capacity=row["workload_capacity"],
        ),
        "current_workload": row["workload"],
        "workload_capacity": row["workload_capacity"],
        "availability_until": row["availability_until"],
    }


def _matches(expertise: list[str], wanted: str, ignore_case: bool) -> bool:
    if ignore_case:
        wanted = wanted.casefold()
        return any(e.casefold() == wanted for e in expertise)
    return wanted in expertise


def get_roster(
    *,
    org: Organization,
    agent: Agent | None,
    filter: str = "all",
    expertise: str | None = None,
    expertise_match: str = EXACT,
) -> dict:
    """`{"agent_context", "colleagues"}` for `agent` (None: a human's view of everyone)."""
    filter = filter or "all"
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

    rows = roster_rows(org=org)
    me = None
    if agent is not None:
        me = next((r for r in rows if r["pk"] == agent.pk), None)
    colleagues = []
    for row in rows:
        if me is not None and row["pk"] == me["pk"]:
            continue
        if filter == "my_team" and (me["team_id"] is None or row["team_id"] != me["team_id"]):
            continue
        info = _colleague(row)
        if filter == "available" and info["status"] not in AVAILABLE_STATUSES:
            continue
        if filter == "by_expertise" and not _matches(
            row["expertise"], expertise, expertise_match == IGNORE_CASE
        ):
            continue
        colleagues.append(info)
    return {"agent_context": _colleague(me) if me else None, "colleagues": colleagues}
