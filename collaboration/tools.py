"""Collaboration tools of the registry: start_collaboration and get_collaboration."""

from organization.caller import Caller
from organization.registry import register_tool

from . import selectors, services
from .serializers import SessionSerializer

CONFIG_SCHEMA = {
    "type": "object",
    "description": "LLM settings: provider (offline|openai|anthropic), model, temperature, max_tokens",
}

START_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "The task for agents to collaborate on"},
        "agents": {
            "type": "array",
            "description": "Agents to involve: {agent_id, focus} for an organization agent, or "
            "an ad-hoc specialist {name, role, focus, config}",
            "items": {
                "type": "object",
                "properties": {
                    "agent_id": {"type": "string"},
                    "name": {"type": "string"},
                    "role": {"type": "string"},
                    "focus": {"type": "string"},
                    "config": CONFIG_SCHEMA,
                },
            },
        },
        "mode": {"type": "string", "enum": ["parallel", "sequential", "hierarchical"]},
        "synthesis": {"type": "string", "enum": ["coordinator", "vote", "merge", "best_of"]},
        "coordinator_config": CONFIG_SCHEMA,
        "context": {"type": "object", "description": "Shared context passed to all agents"},
        "max_parallel": {"type": "integer"},
        "agent_timeout": {"type": "number"},
        "max_total_tokens": {"type": "integer"},
    },
    "required": ["task", "agents"],
}

GET_SCHEMA = {
    "type": "object",
    "properties": {"session_id": {"type": "string", "description": "The session's id"}},
    "required": ["session_id"],
    "additionalProperties": False,
}


def _session_body(caller: Caller, session_id) -> dict:
    session = selectors.session_for(caller=caller, session_id=session_id)
    return SessionSerializer(session).data


@register_tool(
    "start_collaboration",
    "Start a collaborative session: several specialist agents work on one task (parallel, "
    "sequential or hierarchical) and their answers are synthesized. Returns the session id; "
    "poll get_collaboration for the result.",
    START_SCHEMA,
    read_only=False,
    needs_agent=False,
)
def start_collaboration(caller: Caller, params: dict) -> dict:
    session = services.session_create(caller=caller, payload=params)
    return {"success": True, **_session_body(caller, session.pk)}


@register_tool(
    "get_collaboration",
    "Get a collaborative session: status, result, contributions, consensus, metadata, events.",
    GET_SCHEMA,
    read_only=True,
    needs_agent=False,
)
def get_collaboration(caller: Caller, params: dict) -> dict:
    return _session_body(caller, params["session_id"])
