"""Release the wake-ups a bound of wake chains holds: a human lifts the bound."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from .. import sql
from ..models import RunTrigger
from .resume import run_resume

log = logging.getLogger(__name__)


def held_wakes(
    *, organization_id: int, task_id: int | None = None, agent_ids=None
) -> QuerySet[RunTrigger]:
    """The wake-ups a bound holds in the organization (of a task, of agents), oldest first."""
    held = RunTrigger.objects.filter(organization_id=organization_id).exclude(held="")
    if task_id is not None:
        held = held.filter(task_id=task_id)
    if agent_ids is not None:
        held = held.filter(agent_id__in=agent_ids)
    return held.order_by("pk")


def run_release(*, organization_id: int, task_id: int | None = None, agent_ids=None) -> int:
    """The held wake-ups (of a task, of agents) wake their agents as a human's act does, each
    starting a chain of its own. Returns how many."""
    released = 0
    held = held_wakes(organization_id=organization_id, task_id=task_id, agent_ids=agent_ids)
    for agent_id in sorted(set(held.values_list("agent_id", flat=True))):
        with transaction.atomic():
            if sql.locked_agent(agent_id) is None:
                continue
            released += held.filter(agent_id=agent_id).update(
                held="", depth=0, released_at=timezone.now()
            )
            run_resume(agent_id=agent_id)
    if released:
        log.info("released %s held wake-up(s) in organization %s", released, organization_id)
    return released
