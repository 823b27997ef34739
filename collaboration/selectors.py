"""Reads of the collaboration app, scoped to the caller's organization and visibility."""

import uuid

from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects

from infrastructure.errors import NotFound
from organization.caller import (
    Caller,
    admin_organizations,
    caller_for_agent,
    caller_for_key,
    caller_for_member,
)
from organization.models import ApiKey

from .models import CollaborationSession, Contribution, SessionEvent

# What a session's detail shows beside it, in the order it shows them.
DETAILS = (
    Prefetch("contributions", queryset=Contribution.objects.order_by("position")),
    Prefetch("events", queryset=SessionEvent.objects.order_by("id")),
)


def session_total_tokens(session: CollaborationSession, contributions) -> int:
    """Every model call's tokens: the agents' and the coordinator's (the synthesis, a judgement);
    a finished session's as its metadata recorded them (late answers included)."""
    if session.is_finished and "total_tokens" in session.metadata:
        return int(session.metadata["total_tokens"])
    agents = sum(c.tokens_used for c in contributions)
    return agents + int(session.metadata.get("synthesis_tokens", 0))


def sessions_of(*, caller: Caller) -> QuerySet[CollaborationSession]:
    """Humans see the organization's sessions; an agent those it started or takes part in.

    A session holds its agents' answers, which docs/design.md keeps from other colleagues.
    """
    qs = CollaborationSession.objects.filter(organization=caller.organization)
    if caller.agent is not None:
        qs = qs.filter(
            Q(created_by_agent=caller.agent) | Q(contributions__agent=caller.agent)
        ).distinct()
    return qs


def session_detail_queryset(*, caller: Caller) -> QuerySet[CollaborationSession]:
    return sessions_of(caller=caller).prefetch_related(*DETAILS)


def with_details(session: CollaborationSession) -> CollaborationSession:
    """`session` with its contributions and events loaded as session_detail_queryset loads them."""
    prefetch_related_objects([session], *DETAILS)
    return session


def session_for(*, caller: Caller, session_id) -> CollaborationSession:
    """The session, or 404 `session_not_found` exactly as if it did not exist (a malformed id
    too: every door — REST, the tools, MCP — answers the same)."""
    missing = NotFound(f"Collaboration session not found: {session_id}", "session_not_found")
    try:
        pk = uuid.UUID(str(session_id))
    except ValueError:
        raise missing from None
    session = session_detail_queryset(caller=caller).filter(pk=pk).first()
    if session is None:
        raise missing
    return session


def may_use_custom_prompt(session: CollaborationSession, agent) -> bool:
    """Whether `agent`'s private custom prompt may be sent to the model in this session: the
    starter reads every answer, so an agent starter only its own; a human of the organization
    any."""
    if session.created_by_agent_id is not None:
        return starter_may_read_prompt_of(session.created_by_agent_id, agent)
    return session.created_by.startswith(("user:", "org-key:"))


def starter_may_read_prompt_of(starter_agent_id: int | None, agent) -> bool:
    """The same rule before a session exists: a human starter (no agent) reads any prompt, an
    agent its own only. The estimate counts only the prompts the run will send, or its figure
    would tell an agent how long a colleague's private prompt is."""
    return starter_agent_id is None or starter_agent_id == agent.pk


def specialist_caller(session: CollaborationSession, contribution: Contribution) -> Caller | None:
    """Whom a specialist with tools acts as: the organization agent it is, else the session's
    starter (agent, admin member or organization key); None when that starter can no longer act."""
    if contribution.agent is not None:
        return caller_for_agent(contribution.agent)
    if session.created_by_agent is not None:
        return caller_for_agent(session.created_by_agent)
    user = session.created_by_user
    if user is not None:
        organization = session.organization
        if user.is_active and admin_organizations(user).filter(pk=organization.pk).exists():
            return caller_for_member(user, organization)
        return None
    if session.created_by.startswith("org-key:"):
        key = ApiKey.objects.filter(
            organization=session.organization,
            agent=None,
            prefix=session.created_by.removeprefix("org-key:"),
        ).first()
        if key is not None and key.is_active:
            return caller_for_key(key)
    return None


def may_read_tool_results(
    caller: Caller | None, session: CollaborationSession, contribution: Contribution
) -> bool:
    """Whether `caller` may read the results of `contribution`'s tool calls: a human of the
    organization reads them all, an agent only those of the calls that ran as itself."""
    if caller is None:
        return False
    if caller.is_human:
        return True
    acting = contribution.agent_id or session.created_by_agent_id
    return acting == caller.agent.pk
