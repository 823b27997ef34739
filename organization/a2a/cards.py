"""A2A Agent Cards (protocol 0.3): each agent discoverable by A2A clients.

Our extra fields travel in extensions; the card says, in a required `work-intake` extension, that
work is sent through our tasks API or tools, not A2A's message protocol.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.text import slugify

from ..discovery.status import runtime_status_of
from ..models import Agent, Organization
from ..selectors import agent_by_handle, agents_with_workload
from ..workload import status_for

A2A_PROTOCOL_VERSION = "0.3.0"
CARD_VERSION = "0.1.0"
EXTENSION_URI = "urn:agent-org:a2a-extension:organization:v1"
INTAKE_EXTENSION_URI = "urn:agent-org:a2a-extension:work-intake:v1"
NOT_A2A_MESSAGING = (
    "Not an A2A message endpoint: this service does not implement A2A's message protocol "
    "(message/send, tasks/get). Send work as an Agent Org task: POST {tasks_url} "
    '{{"title": "...", "agent_id": "{agent_id}"}} with an Agent Org API key, or use the '
    "tools over MCP ({mcp_url}) or REST call-tool (see the work-intake extension)."
)
MODES = ["text/plain", "application/json"]


def skill_of(expertise: str, agent: Agent, taken: set[str]) -> dict:
    base = slugify(expertise) or "skill"
    skill_id, n = base, 2
    while skill_id in taken:
        skill_id, n = f"{base}-{n}", n + 1
    taken.add(skill_id)
    return {
        "id": skill_id,
        "name": expertise,
        "description": f"{agent.name} ({agent.role or 'agent'}) works with {expertise}.",
        "tags": [expertise],
        "inputModes": MODES,
        "outputModes": MODES,
    }


def shows_worktree(agent: Agent, viewer: Agent | None) -> bool:
    """Seed 002's worktree isolation: an agent learns another's worktree (and its expert id)
    only when they share it, as on `/api/experts`; a human (`viewer` None) sees every one."""
    return viewer is None or viewer.worktree_path == agent.worktree_path


def organization_extension(agent: Agent, reports: list[str], viewer: Agent | None) -> dict:
    workload = agent.current_workload
    # The reverse one-to-one raises RelatedObjectDoesNotExist (an AttributeError) when absent.
    hierarchy_role = getattr(agent, "hierarchy_role", None)
    runtime = runtime_status_of(agent)
    worktree = shows_worktree(agent, viewer)
    return {
        "uri": EXTENSION_URI,
        "description": "Agent Org: the agent's place in its organization, status and workload.",
        "required": False,
        "params": {
            "agent_id": agent.handle,
            "expert_id": agent.pk if worktree else None,
            "organization": agent.organization.slug,
            "status": status_for(
                is_paused=agent.is_paused, workload=workload, capacity=agent.workload_capacity
            ),
            "current_workload": workload,
            "workload_capacity": agent.workload_capacity,
            "team": agent.team.name if agent.team_id else None,
            "role": agent.role,
            "hierarchy_role": hierarchy_role.role if hierarchy_role else None,
            "seniorId": agent.senior.handle if agent.senior_id else None,
            "reports": reports,
            "availability_until": (
                agent.availability_until.isoformat() if agent.availability_until else None
            ),
            "worktree_path": agent.worktree_path if worktree else None,
            "runtime_status": runtime.status,
        },
    }


def intake_extension(agent: Agent, base_url: str) -> dict:
    """How to give this agent work, since its card's `url` speaks our API, not A2A messaging."""
    return {
        "uri": INTAKE_EXTENSION_URI,
        "description": NOT_A2A_MESSAGING.format(
            tasks_url=f"{base_url}/api/tasks", agent_id=agent.handle, mcp_url=f"{base_url}/mcp"
        ),
        # A client that does not understand this extension would send A2A messages to `url`.
        "required": True,
        "params": {
            "a2a_messaging": False,
            "send_work": {
                "method": "POST",
                "url": f"{base_url}/api/tasks",
                "body": {"title": "<what to do>", "agent_id": agent.handle},
                "optional": ["description", "required_expertise", "urgency", "deadline"],
                "auth": "Authorization: Bearer <Agent Org API key>",
            },
            "read_task": f"{base_url}/api/tasks/{{id}}",
            "mcp_url": f"{base_url}/mcp",
            "call_tool_url": f"{base_url}/api/agent-engine/call-tool",
            "tools_url": f"{base_url}/api/tools",
            "tool": "create_task",
        },
    }


def agent_card(agent: Agent, *, base_url: str, reports: list[str], viewer: Agent | None) -> dict:
    """The A2A Agent Card of `agent` (annotated with `current_workload`) as `viewer` (the
    calling agent; None for a human) may read it."""
    base_url = base_url.rstrip("/")
    org = agent.organization
    taken: set[str] = set()
    team = f" on the {agent.team.name} team" if agent.team_id else ""
    expertise = ", ".join(agent.expertise) or "no listed expertise"
    return {
        "protocolVersion": A2A_PROTOCOL_VERSION,
        "name": agent.name,
        "description": (
            f"{agent.role or 'Agent'}{team} at {org.name}. Expertise: {expertise}. "
            "Work reaches it as an Agent Org task, not as A2A messages: see the "
            "work-intake extension."
        ),
        "url": f"{base_url}/api/tasks",
        "preferredTransport": "HTTP+JSON",
        "version": CARD_VERSION,
        "provider": {"organization": org.name, "url": base_url},
        "documentationUrl": f"{base_url}/api/docs/",
        "capabilities": {
            "streaming": False,
            # A2A's push notifications are set up by the client for its own task (not
            # implemented); the agent's webhook is the admin's, and private.
            "pushNotifications": False,
            "stateTransitionHistory": True,
            "extensions": [
                organization_extension(agent, reports, viewer),
                intake_extension(agent, base_url),
            ],
        },
        "securitySchemes": {
            "agentOrgKey": {
                "type": "http",
                "scheme": "bearer",
                "description": "An Agent Org API key: Authorization: Bearer <key>.",
            }
        },
        "security": [{"agentOrgKey": []}],
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": [skill_of(e, agent, taken) for e in agent.expertise],
    }


def card_for(*, org: Organization, handle: str, base_url: str, viewer: Agent | None) -> dict:
    agent = agent_by_handle(org=org, handle=handle, with_workload=True)
    reports = list(
        org.agents.filter(senior=agent).order_by("handle").values_list("handle", flat=True)
    )
    return agent_card(agent, base_url=base_url, reports=reports, viewer=viewer)


def agents_for_cards(*, org: Organization) -> QuerySet[Agent]:
    """The agents of the card index, by agent id (paged by the view)."""
    return agents_with_workload(org=org).select_related("organization").order_by("handle")


def cards_for(agents: list[Agent], *, base_url: str, viewer: Agent | None) -> list[dict]:
    """The cards of a page of `agents_for_cards` (one more query: their reports)."""
    reports: dict[int, list[str]] = {}
    rows = Agent.objects.filter(senior__in=[a.pk for a in agents]).order_by("handle")
    for senior_id, handle in rows.values_list("senior_id", "handle"):
        reports.setdefault(senior_id, []).append(handle)
    return [
        agent_card(a, base_url=base_url, reports=reports.get(a.pk, []), viewer=viewer)
        for a in agents
    ]
