"""Teams, expertise groups, agents, their hierarchy roles and the team rules.

Written as the admin writes them: the model's validation (`full_clean`), seed 003's services for
roles and rules, and `agent_room_changed` when an agent is resumed, given room or made managed.
"""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.core.exceptions import ValidationError

from infrastructure.errors import Invalid, NotFound
from organization import registry
from organization.hierarchy import role_set, rules_set
from organization.models import (
    Agent,
    AgentRole,
    AgentRuntime,
    ExpertiseGroup,
    Organization,
    Team,
    TeamRule,
)
from organization.models.agents import TOKEN_ENV_SUPERUSER_ONLY
from organization.selectors import team_rule_of
from organization.services import agent_card_checked, agent_room_changed, card_checked

from .base import Context, Entry

# An agent's settings as the file names them (model field → file name): everything an admin
# edits on its page but its id, team and senior (named, below); never its keys or its state.
AGENT_SETTINGS = {
    "name": "name",
    "role": "role",
    "expertise": "expertise",
    "is_paused": "paused",
    "workload_capacity": "workload_capacity",
    "system_prompt": "system_prompt",
    "worktree_path": "worktree_path",
    "webhook_url": "webhook_url",
    "llm_provider": "llm_provider",
    "llm_model": "llm_model",
    "llm_temperature": "llm_temperature",
    "llm_max_tokens": "llm_max_tokens",
    "runtime": "runtime",
    "max_turns": "max_turns",
    "allowed_tools": "allowed_tools",
    "a2a_card_url": "a2a_card_url",
    "a2a_token_env": "a2a_token_env",
}
# Changes after which an agent may take queued work (as the admin's agent page does).
GAINS_ROOM = {"paused", "workload_capacity", "runtime"}
# Each card may take A2A_REMOTE_TIMEOUT_SECONDS: an import fetches at most this many, this many
# at a time.
MAX_CARDS_PER_IMPORT = 50
CARD_FETCHES_AT_ONCE = 10
ROLE_FLAGS = ("can_assign_to_peers", "can_escalate_to_supervisor")
RULE_FLAGS = ("allow_peer_assignment", "require_supervisor_for_tasks")
STALE_AFTER = ("critical", "high", "normal", "low")


def _team(org: Organization, name: str | None) -> Team | None:
    if name is None:
        return None
    team = Team.objects.filter(organization=org, name=name).first()
    if team is None:
        raise NotFound(f"team: Team not found: {name}", "team_not_found")
    return team


def _agent(org: Organization, handle: str, field: str = "") -> Agent:
    agent = Agent.objects.filter(organization=org, handle=handle).first()
    if agent is None:
        raise NotFound(f"{field}Agent not found: {handle}", "agent_not_found")
    return agent


# --- teams and expertise groups ------------------------------------------------------------


def export_teams(org: Organization) -> list[dict]:
    return [{"name": name} for name in org.teams.order_by("name").values_list("name", flat=True)]


def apply_team(context: Context, entry: Entry) -> None:
    team = Team(organization=context.org, name=entry.item["name"])
    team.full_clean()
    team.save()


def export_expertise_groups(org: Organization) -> list[dict]:
    groups = ExpertiseGroup.objects.filter(organization=org).order_by("name")
    return [{"name": group.name, "expertise": group.expertise} for group in groups]


def apply_expertise_group(context: Context, entry: Entry) -> None:
    group = ExpertiseGroup.objects.filter(organization=context.org, name=entry.item["name"]).first()
    group = group or ExpertiseGroup(organization=context.org, name=entry.item["name"])
    if "expertise" in entry.item:
        group.expertise = entry.item["expertise"]
    group.full_clean()
    group.save()


# --- agents --------------------------------------------------------------------------------


def export_agents(org: Organization) -> list[dict]:
    agents = Agent.objects.filter(organization=org).select_related("team", "senior")
    return [
        {
            "id": agent.handle,
            "name": agent.name,
            "role": agent.role,
            "team": agent.team.name if agent.team_id else None,
            "senior": agent.senior.handle if agent.senior_id else None,
        }
        | {name: getattr(agent, attr) for attr, name in AGENT_SETTINGS.items()}
        for agent in agents.order_by("handle")
    ]


def apply_agent(context: Context, entry: Entry) -> None:
    """Create or update the agent with every setting of the item but its senior (`finish_agent`,
    once every agent of the file exists)."""
    org, item = context.org, entry.item
    if entry.is_new:
        agent = Agent(organization=org, handle=item["id"])
    else:
        agent = _agent(org, item["id"])
    token_env = agent.a2a_token_env
    for attr, name in AGENT_SETTINGS.items():
        if name in item:
            setattr(agent, attr, item[name])
    user = context.caller.user
    if agent.a2a_token_env != token_env and user is not None and not user.is_superuser:
        raise ValidationError({"a2a_token_env": TOKEN_ENV_SUPERUSER_ONLY})
    if "team" in item:
        agent.team = _team(org, item["team"])
    unknown = [name for name in agent.allowed_tools or [] if name not in registry.REGISTRY]
    if unknown:
        raise ValidationError({"allowed_tools": f"Unknown tool(s): {', '.join(unknown)}."})
    if agent.is_remote_a2a:
        # As the admin's save: its card fetched and checked, its skills its expertise.
        card = context.cards.get(agent.a2a_card_url)
        if isinstance(card, ValidationError):
            raise card
        agent_card_checked(agent, card)
    agent.full_clean()
    agent.save()
    if not entry.is_new and GAINS_ROOM & entry.changed:
        agent_room_changed(agent=agent)


def cards_to_fetch(org: Organization | None, items: list[dict]) -> list[str]:
    """The card URLs of the remote A2A agents the file creates or changes, once each."""
    before = {}
    if org is not None:
        before = {item["id"]: item for item in export_agents(org)}
    urls = []
    for item in items:
        old = before.get(item.get("id"))
        runtime = item.get("runtime", old["runtime"] if old else None)
        url = item.get("a2a_card_url", old["a2a_card_url"] if old else None)
        changed = old is None or any(old.get(name) != value for name, value in item.items())
        if runtime == AgentRuntime.A2A and url and changed and url not in urls:
            urls.append(url)
    return urls


def fetch_cards(urls: list[str]) -> dict:
    """The cards by URL (a refusal as its ValidationError), fetched side by side before the
    import's transaction, so no row stays locked while a remote answers."""

    def fetched(url: str):
        try:
            return card_checked(url)
        except ValidationError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=CARD_FETCHES_AT_ONCE) as pool:
        return dict(zip(urls, pool.map(fetched, urls), strict=True))


def finish_agent(context: Context, entry: Entry) -> None:
    """Set whom the agent reports to, refusing a reporting line that would go round."""
    if "senior" not in entry.item or "senior" not in entry.changed:
        return
    org, handle, senior_handle = context.org, entry.item["id"], entry.item["senior"]
    agent, senior = _agent(org, handle), None
    if senior_handle is not None:
        senior = _agent(org, senior_handle, "senior: ")
        if _reports_to(_reporting_lines(context), senior_handle, handle):
            raise Invalid(f"senior: {senior_handle} would close a cycle in the reporting line.")
    agent.senior = senior
    agent.save(update_fields=["senior", "updated_at"])


def _reporting_lines(context: Context) -> dict[str, str | None]:
    """Who reports to whom once the import is done: the organization's lines, then the file's."""
    if "seniors" not in context.cache:
        lines = dict(
            Agent.objects.filter(organization=context.org).values_list("handle", "senior__handle")
        )
        for item in context.document.get("agents", []):
            if "senior" in item:
                lines[item["id"]] = item["senior"]
        context.cache["seniors"] = lines
    return context.cache["seniors"]


def _reports_to(lines: dict[str, str | None], start: str, target: str) -> bool:
    """Whether the line up from `start` reaches `target` (itself included)."""
    seen = set()
    current = start
    while current is not None and current not in seen:
        if current == target:
            return True
        seen.add(current)
        current = lines.get(current)
    return False


# --- seed 003's hierarchy ------------------------------------------------------------------


def export_roles(org: Organization) -> list[dict]:
    roles = AgentRole.objects.filter(agent__organization=org).select_related("agent")
    return [
        {"agent": role.agent.handle, "role": role.role}
        | {flag: getattr(role, flag) for flag in ROLE_FLAGS}
        for role in roles.order_by("agent__handle")
    ]


def apply_role(context: Context, entry: Entry) -> None:
    item = entry.item
    data = {"agent_id": item["agent"], "role": item["role"]}
    role_set(caller=context.caller, data=data | {f: item.get(f) for f in ROLE_FLAGS})


def export_team_rules(org: Organization) -> list[dict]:
    rule = team_rule_of(org=org)
    return [
        {
            "allow_peer_assignment": rule.allow_peer_assignment,
            "require_supervisor_for_tasks": rule.require_supervisor_for_tasks,
            "default_supervisor": (
                rule.default_supervisor.handle if rule.default_supervisor_id else None
            ),
            "max_delegation_depth": rule.max_delegation_depth,
            "stale_after_seconds": {
                urgency: int(getattr(rule, f"stale_after_{urgency}").total_seconds())
                for urgency in STALE_AFTER
            },
        }
    ]


def apply_team_rules(context: Context, entry: Entry) -> None:
    """Seed 003's rules through its service (the default supervisor must hold the role), then
    the delegation depth and stale-queue thresholds as the admin's form saves them."""
    item = entry.item
    data = {flag: item[flag] for flag in RULE_FLAGS if flag in item}
    if "default_supervisor" in item:
        data["default_supervisor_agent_id"] = item["default_supervisor"]
    rules_set(caller=context.caller, data=data)
    rule = TeamRule.objects.get(organization=context.org)
    if "max_delegation_depth" in item:
        rule.max_delegation_depth = item["max_delegation_depth"]
    for urgency, seconds in item.get("stale_after_seconds", {}).items():
        setattr(rule, f"stale_after_{urgency}", timedelta(seconds=seconds))
    rule.full_clean()
    rule.save()
