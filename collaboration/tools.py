"""Collaboration tools of the registry: start_collaboration and get_collaboration, validated by
the serializers of their REST twins."""

from organization.caller import Caller
from organization.registry import register_tool

from . import selectors, services
from .serializers import (
    SessionIdSerializer,
    SessionSerializer,
    StartCollaborationSerializer,
)
from .spec import StartSpec


def _session_body(caller: Caller, session_id) -> dict:
    session = selectors.session_for(caller=caller, session_id=session_id)
    return SessionSerializer(session, context={"caller": caller}).data


@register_tool(
    "start_collaboration",
    "Start a collaborative session: several specialist agents work on one task (parallel, "
    "sequential or hierarchical) and their answers are synthesized. Returns the session id; "
    "poll get_collaboration for the result.",
    StartCollaborationSerializer,
    read_only=False,
    needs_agent=False,
)
def start_collaboration(caller: Caller, params: dict) -> dict:
    session = services.session_start(caller=caller, spec=StartSpec(**params))
    return {"success": True, **_session_body(caller, session.pk)}


@register_tool(
    "get_collaboration",
    "Get a collaborative session: status, result, contributions, consensus, metadata, events.",
    SessionIdSerializer,
    read_only=True,
    needs_agent=False,
)
def get_collaboration(caller: Caller, params: dict) -> dict:
    return _session_body(caller, params["session_id"])
