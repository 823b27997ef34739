"""Organization tools of the registry (seed 000's roster): each validated by the serializer
of its REST twin."""

from infrastructure.errors import Invalid, NotFound

from . import services
from .caller import Caller
from .models import Agent
from .prompt import system_prompt_for
from .registry import register_tool
from .roster import get_roster
from .selectors import agent_by_handle
from .serializers import (
    AgentParamSerializer,
    AvailabilityAnswerSerializer,
    AvailabilitySerializer,
    RosterQuerySerializer,
)


def roster_subject(caller: Caller, agent_param: str | None):
    """Agents see their own roster; a human may name the agent whose roster it is."""
    if caller.agent is not None:
        return caller.agent
    if agent_param:
        return agent_by_handle(org=caller.organization, handle=agent_param)
    return None


@register_tool(
    "get_organization_roster",
    "Get current roster of all agents in organization with status and workload",
    RosterQuerySerializer,
    read_only=True,
)
def get_organization_roster(caller: Caller, params: dict) -> dict:
    return get_roster(
        org=caller.organization,
        agent=roster_subject(caller, params.get("agent")),
        filter=params["filter"],
        expertise=params.get("expertise"),
        expertise_match=params["expertise_match"],
    )


def visible_prompt_subject(caller: Caller, agent_id: str | None) -> Agent:
    """Whose system prompt `caller` may read (docs/design.md "Data visibility").

    An agent reads its own only: another agent's prompt answers 404, as if it did not exist.
    Organization keys and admin members read any agent's of their organization.
    """
    if caller.agent is not None:
        if agent_id and agent_id != caller.agent.handle:  # blank is "not given", as elsewhere
            raise NotFound(f"Agent not found: {agent_id}", "agent_not_found")
        return caller.agent
    if not agent_id:
        raise Invalid(
            "An organization key acts as no agent: name one with 'agent'.", "agent_required"
        )
    return agent_by_handle(org=caller.organization, handle=agent_id)


@register_tool(
    "get_my_context",
    "Get your full system prompt: your custom prompt plus your organizational context "
    "(identity, manager, workload, expertise, delegation framework), fresh",
    AgentParamSerializer,
    read_only=True,
)
def get_my_context(caller: Caller, params: dict) -> dict:
    agent = visible_prompt_subject(caller, params.get("agent"))
    return {"system_prompt": system_prompt_for(agent)}


@register_tool(
    "set_my_availability",
    "Say when you expect to be free (seed 001's availability_until, ISO 8601), or null for "
    "available indefinitely; colleagues see it in the roster and in queue wait estimates",
    AvailabilitySerializer,
    read_only=False,
)
def set_my_availability(caller: Caller, params: dict) -> dict:
    agent = services.agent_set_availability(
        agent=caller.require_agent(), until=params["availability_until"]
    )
    answer = {"id": agent.handle, "availability_until": agent.availability_until}
    return AvailabilityAnswerSerializer(answer).data
