"""Collaboration tools of the registry: start_collaboration and get_collaboration."""

from organization.caller import Caller
from organization.registry import register_tool

from . import selectors, services
from .serializers import SessionSerializer

# LLMConfigSerializer's fields: closed, so a strict-mode client can fill it in.
CONFIG_SCHEMA = {
    "type": "object",
    "description": "LLM settings (each optional): provider, model, temperature, max_tokens",
    "properties": {
        "provider": {
            "type": "string",
            "enum": ["offline", "openai", "anthropic"],
            "description": "Which LLM provider.",
        },
        "model": {"type": "string", "description": "The provider's model name."},
        "temperature": {"type": "number", "description": "Sampling temperature, 0 to 2."},
        "max_tokens": {"type": "integer", "description": "Most tokens per answer."},
        "system_prompt": {"type": "string", "description": "Ad-hoc specialists only."},
    },
    "additionalProperties": False,
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
                    "agent_id": {
                        "type": "string",
                        "description": "An agent of the organization (its id), or give name.",
                    },
                    "name": {"type": "string", "description": "An ad-hoc specialist's name."},
                    "role": {"type": "string", "description": "An ad-hoc specialist's role."},
                    "focus": {"type": "string", "description": "What this agent focuses on."},
                    "config": CONFIG_SCHEMA,
                },
                "additionalProperties": False,
            },
        },
        "mode": {
            "type": "string",
            "enum": ["parallel", "sequential", "hierarchical"],
            "description": "How the agents work together.",
        },
        "synthesis": {
            "type": "string",
            "enum": ["coordinator", "vote", "merge", "best_of"],
            "description": "How their answers are combined.",
        },
        "coordinator_config": {**CONFIG_SCHEMA, "description": "The coordinator's LLM settings"},
        # Free-form by seed 004's contract: the one object here that stays open.
        "context": {"type": "object", "description": "Shared context passed to all agents"},
        "max_parallel": {"type": "integer", "description": "At most this many agents at once."},
        "agent_timeout": {"type": "number", "description": "Seconds per agent."},
        "max_total_tokens": {"type": "integer", "description": "Token budget of the session."},
    },
    "required": ["task", "agents"],
    "additionalProperties": False,
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
