"""The document's sections, one per kind of setting, in the order an import applies them.

A section is a pair — `export(org)` the items as the file holds them, `apply(context, entry)` one
item written through its app's service — plus how an item is named. Adding a kind to the file is
one module with its pair and one line in `SECTIONS` (and its part of `agent-org.schema.json`).
"""

from collections.abc import Callable
from dataclasses import dataclass

from organization.models import Organization

from .base import Context, Entry
from .budgets import apply_budget, budget_canonical, export_budgets
from .people import (
    apply_agent,
    apply_expertise_group,
    apply_role,
    apply_team,
    apply_team_rules,
    export_agents,
    export_expertise_groups,
    export_roles,
    export_team_rules,
    export_teams,
    finish_agent,
)
from .policies import apply_policy, export_policies, policy_canonical
from .routines import apply_routine, export_routines


def _same(item: dict) -> dict:
    return item


@dataclass(frozen=True)
class Section:
    name: str
    label: str  # an item in words: "agent", "approval policy"
    export: Callable[[Organization], list[dict]]
    apply: Callable[[Context, Entry], None]
    # The fields naming an item: matched on them, never changed by an import.
    key_fields: tuple[str, ...]
    # After every item of the section is applied (what refers to other items of the section).
    finish: Callable[[Context, Entry], None] | None = None
    # One object in the file rather than a list.
    single: bool = False
    # Several items may share a name (matched in order).
    repeatable: bool = False
    # The item as `export` would write it (amounts in their shortest form), before comparing.
    canonical: Callable[[dict], dict] = _same

    def key(self, item: dict) -> str:
        return " ".join(str(item[f]) for f in self.key_fields if item.get(f) is not None)


SECTIONS = [
    Section("teams", "team", export_teams, apply_team, ("name",)),
    Section(
        "expertise_groups",
        "expertise group",
        export_expertise_groups,
        apply_expertise_group,
        ("name",),
    ),
    Section("agents", "agent", export_agents, apply_agent, ("id",), finish=finish_agent),
    Section("hierarchy_roles", "hierarchy role", export_roles, apply_role, ("agent",)),
    Section("team_rules", "team rules", export_team_rules, apply_team_rules, (), single=True),
    Section(
        "budgets",
        "budget",
        export_budgets,
        apply_budget,
        ("scope", "team", "agent"),
        canonical=budget_canonical,
    ),
    Section(
        "approval_policies",
        "approval policy",
        export_policies,
        apply_policy,
        ("name",),
        repeatable=True,
        canonical=policy_canonical,
    ),
    Section(
        "routines",
        "routine",
        export_routines,
        apply_routine,
        ("title",),
        repeatable=True,
    ),
]
