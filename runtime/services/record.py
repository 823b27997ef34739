"""Record a run's turns under its lease, and read whether its agent was paused or made external.

A record that is its own transaction does not wait for the disk (docs/runtime.md says why)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from infrastructure.prepared import update_where
from organization.models import Agent, AgentRuntime

from .. import sql
from ..models import Run, RunTurn


@dataclass(frozen=True)
class Recorded:
    """A record the run wrote under its lease; whether its agent is paused now, or was made
    external meanwhile (either way the run stops before its next model call)."""

    agent_paused: bool
    agent_external: bool = False


def _recorded(paused, runtime) -> Recorded:
    return Recorded(agent_paused=bool(paused), agent_external=runtime != AgentRuntime.MANAGED)


def run_record_turn(
    *, run: Run, token: str, turn: dict, prompt_tokens: int, completion_tokens: int
) -> Recorded | None:
    """Write one turn (by its index) with the run's tokens so far, and renew the lease; None,
    writing nothing, when the lease was lost."""
    return run_record_turns(
        run=run,
        token=token,
        turns=[turn],
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def run_record_turns(
    *, run: Run, token: str, turns: list[dict], prompt_tokens: int, completion_tokens: int
) -> Recorded | None:
    """Write turns (by their index) with the run's tokens so far, renew the lease and read the
    agent's state; None, writing nothing, when the lease was lost. The run's row is written
    first: its lock orders this record before or after another worker's claim."""
    now = timezone.now()
    if sql.is_postgresql():
        agent = sql.record_turns(
            run_id=run.pk,
            agent_id=run.agent_id,
            token=token,
            turns=turns,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            now=now,
        )
        return _recorded(*agent) if agent is not None else None
    with transaction.atomic():
        if not update_where(
            Run,
            {"pk": run.pk, "lease_token": token},
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            heartbeat_at=now,
        ):
            return None
        RunTurn.objects.bulk_create(
            [RunTurn(run_id=run.pk, index=turn["index"], data=turn) for turn in turns],
            update_conflicts=True,
            unique_fields=["run", "index"],
            update_fields=["data"],
        )
        agent = Agent.objects.filter(pk=run.agent_id).values_list("is_paused", "runtime")
    return _recorded(*(agent.first() or (False, None)))
