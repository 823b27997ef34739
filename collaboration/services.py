"""Writes of the collaboration app: start a session, cancel it (the events are in events.py).

Every door validates with StartCollaborationSerializer, then calls `session_start`.
"""

import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from costs.budgets import check_fits
from costs.models import LIFETIME, Budget, BudgetScope
from infrastructure import outbox
from infrastructure.errors import Conflict, Forbidden, RateLimited
from organization.caller import Caller
from organization.models import Organization

from . import events
from .estimate import estimate
from .models import COORDINATOR_ROLE, CollaborationSession, Contribution, Mode, SessionStatus
from .runner.finish import session_finish_cancelled
from .serializers.start import validated_start
from .spec import StartSpec
from .tasks import run_collaboration as _run_collaboration_task

START_WINDOW = timedelta(hours=1)


def session_estimate(*, caller: Caller, spec: StartSpec) -> dict:
    """What a validated start could cost against each budget; nothing starts."""
    check_tool_grants(caller, spec)
    return _estimate(caller, spec)


def _estimate(caller: Caller, spec: StartSpec) -> dict:
    return estimate(
        spec,
        caller.organization,
        starter_agent_id=caller.agent_id,
        max_cost_usd=spec.max_cost_usd,
        viewer=caller.agent,
    )


def check_start_rate(org: Organization) -> None:
    """COLLAB_MAX_STARTS_PER_HOUR sessions per organization in any hour, counted from the
    sessions themselves; the caller holds the organization's row lock, so concurrent starts
    cannot both take the last place."""
    limit = settings.COLLAB_MAX_STARTS_PER_HOUR
    now = timezone.now()
    recent = list(
        CollaborationSession.objects.filter(organization=org, created_at__gt=now - START_WINDOW)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) < limit:
        return
    # A place frees when the limit-th newest start leaves the window.
    wait = (recent[-1] + START_WINDOW - now).total_seconds()
    raise RateLimited(
        f"This organization started {limit} collaborations in the last hour, its limit; "
        f"try again in {math.ceil(wait)} s.",
        retry_after=max(1, math.ceil(wait)),
    )


def check_tool_grants(caller: Caller, spec: StartSpec) -> None:
    """403 `tools_forbidden` when an agent gives a colleague tools: they would run as that colleague
    and show the starter what it sees. Humans and the agent itself may; ad-hoc specialists' tools
    run as the starter, so any starter may give them."""
    if caller.agent is None:
        return
    for i, agent in enumerate(spec.agents):
        if agent.agent is not None and agent.config.get("tools") and agent.agent != caller.agent:
            raise Forbidden(
                f"agents[{i}].config.tools: {agent.key}'s tools would run as {agent.key} and show "
                "you what it sees; only a human of the organization or that agent may give them.",
                "tools_forbidden",
            )


@transaction.atomic
def session_start(*, caller: Caller, spec: StartSpec) -> CollaborationSession:
    """Store the session with one pending Contribution per agent and queue it on a worker."""
    check_tool_grants(caller, spec)
    Organization.objects.select_for_update().filter(pk=caller.organization.pk).first()
    check_start_rate(caller.organization)
    check_fits(_estimate(caller, spec))
    session = CollaborationSession.objects.create(
        organization=caller.organization,
        created_by_agent=caller.agent,
        created_by_user=caller.user if caller.user is not None and caller.agent is None else None,
        created_by=caller.label,
        dispatched_at=timezone.now(),
        task=spec.task,
        mode=spec.mode,
        synthesis=spec.synthesis,
        coordinator_config=spec.coordinator_config,
        context=spec.context,
        max_parallel=spec.max_parallel,
        agent_timeout=spec.agent_timeout,
        max_total_tokens=spec.max_total_tokens,
    )
    Contribution.objects.bulk_create(
        Contribution(
            session=session,
            position=i,
            agent_key=a.key,
            agent=a.agent,
            display_name=a.display_name,
            role=COORDINATOR_ROLE if spec.mode == Mode.HIERARCHICAL and i == 0 else a.role,
            focus=a.focus,
            config=a.config,
        )
        for i, a in enumerate(spec.agents)
    )
    if spec.max_cost_usd is not None:
        Budget.objects.create(
            organization=caller.organization,
            scope=BudgetScope.COLLABORATION,
            session=session,
            limit_usd=spec.max_cost_usd,
            period=LIFETIME,
            created_by=caller.label,
        )
    events.session_queued_event(
        session.id, agents=[a.key for a in spec.agents], mode=spec.mode, synthesis=spec.synthesis
    )
    # Through the outbox: the session is accepted (202) even while the broker is away.
    outbox.enqueue(_run_collaboration_task.name, str(session.id))
    return session


def session_create(*, caller: Caller, payload) -> CollaborationSession:
    """Validate a start body (as REST reads it) and start it: the in-process door."""
    return session_start(caller=caller, spec=validated_start(payload, caller=caller))


def can_manage(caller: Caller, session: CollaborationSession) -> bool:
    """Humans of the organization, or the agent that started the session."""
    return caller.is_human or session.created_by_agent_id == caller.agent.pk


@transaction.atomic
def session_cancel(*, caller: Caller, session: CollaborationSession) -> CollaborationSession:
    """Stop pending work: a queued session ends now, a running one at its runner's next check."""
    if not can_manage(caller, session):
        raise Forbidden(
            "Only the agent that started a session, or a human of the organization, may cancel it.",
            "forbidden",
        )
    session = CollaborationSession.objects.select_for_update().get(pk=session.pk)
    if session.is_finished:
        raise Conflict(f"The session is already {session.status}.", "session_finished")
    if not session.cancel_requested:
        session.cancel_requested = True
        session.save(update_fields=["cancel_requested"])
        events.cancel_requested_event(session.id, by=caller.label)
    if session.status == SessionStatus.QUEUED:
        session_finish_cancelled(session)
    return session
