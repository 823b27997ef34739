"""One run of a managed agent, on a worker: claim it, drive the model with the tools, settle it.

Each turn is recorded as it happens; settle.py says how a run ends (docs/runtime.md)."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.db import connection

from collaboration import providers
from collaboration.providers import LLMRequest, Purpose
from collaboration.toolloop import run_tool_loop
from infrastructure import tracing
from infrastructure.atomic import DATABASE_GONE, once_reconnected
from infrastructure.prepared import update_where
from organization import registry
from organization.caller import caller_for_agent
from tasks.models import FINISHED_STATUSES

from . import context, offline, services
from .lease import CLAIMED, claim, heartbeats
from .models import Run, RunStatus
from .recorder import TurnRecorder
from .settle import settle, settle_failed
from .stops import AgentMadeExternal, AgentPaused, LeaseLost, WaitForHeadroom

__all__ = [
    "WAITING",
    "AgentMadeExternal",
    "AgentPaused",
    "LeaseLost",
    "TurnRecorder",
    "WaitForHeadroom",
    "execute",
    "llm_settings",
    "prepare",
    "run_agent",
    "tool_names_of",
]

log = logging.getLogger(__name__)

# A managed agent's completion budget per model call when its max tokens are not set.
DEFAULT_MAX_TOKENS = 1024

# What `run_agent` answers for a run that waits for budget headroom (its task retries it).
WAITING = "waiting"


def run_agent(run_id: int) -> str:
    """Run (or resume) the run; returns what the delivery found (lease.CLAIMED, BUSY, …)."""
    token = uuid.uuid4().hex
    outcome, run = claim(run_id, token)
    if outcome != CLAIMED:
        return outcome
    heartbeats.hold(token)
    try:
        if run.attempts > settings.RUNTIME_MAX_ATTEMPTS:
            _give_up(run, token)
        else:
            provider = run.provider or run.agent.llm_provider
            with tracing.invoke_agent(run.agent, task=run.task_id, provider=provider):
                execute(run, token)
    except LeaseLost:
        log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except AgentMadeExternal:
        log.info("run %s: its agent was made external; the run ends here", run_id)
        _end_made_external(run, token)
    except AgentPaused:
        log.info("run %s: its agent was paused; handed back until it is resumed", run_id)
        if not services.run_hand_back(run=run, token=token):
            log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except WaitForHeadroom as exc:
        log.info("run %s waits for budget headroom: %s", run_id, exc)
        if services.run_wait_for_headroom(run=run, token=token, reason=str(exc)):
            return WAITING
        log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except DATABASE_GONE:
        # The database went away under the run (a restart, a failover): the run is not at
        # fault. Its lease is handed back and the error raised, so that the task runs it again
        # at once, resuming it from its recorded turns (not failed, not left for the sweep).
        log.exception("run %s lost its database; it will resume", run_id)
        once_reconnected(
            lambda: Run.objects.filter(pk=run_id, lease_token=token).update(lease_token="")
        )
        raise
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        # acks_late would otherwise ack a crashed run and leave it "running" until the sweep.
        connection.close()  # it may be what broke
        try:
            settle_failed(run, token, f"internal error: {type(exc).__name__}: {exc}"[:2000])
        except LeaseLost:
            log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    finally:
        heartbeats.release(token)
    return CLAIMED


def _end_made_external(run: Run, token: str) -> None:
    """The agent was made external under way: the run ends before its next model call, failed
    with `services.MADE_EXTERNAL`, its tasks left as they are for the external driver."""
    if not services.run_finish(
        run=run,
        token=token,
        status=RunStatus.FAILED,
        error=services.MADE_EXTERNAL,
        outcome=[
            {"task": t["id"], "action": "none", "why": "its agent was made external"}
            for t in run.context.get("tasks", [])
        ],
    ):
        log.warning("run %s: the lease was lost to another worker; stopping here", run.pk)


def _give_up(run: Run, token: str) -> None:
    """The run was started RUNTIME_MAX_ATTEMPTS times and never finished: whatever stops it
    (a crash that kills its worker, the time limit) would stop it again. Fail it and block its
    tasks, as for a provider error; if blocking them is what fails, the run is failed anyway."""
    error = (
        f"Given up after {run.attempts - 1} starts that did not finish: its worker crashed, "
        "was killed or reached RUNTIME_RUN_TIME_LIMIT each time (RUNTIME_MAX_ATTEMPTS)."
    )
    log.error("run %s: %s", run.pk, error)
    try:
        settle_failed(run, token, error)
    except (LeaseLost, DATABASE_GONE):
        raise
    except Exception:
        log.exception("run %s: its tasks could not be blocked", run.pk)
        connection.close()
        services.run_finish(run=run, token=token, status=RunStatus.FAILED, error=error)


def llm_settings(agent) -> tuple[str, str, float | None, int]:
    """The agent's provider, model, temperature and max tokens (defaults where unset)."""
    provider = agent.llm_provider or providers.default_provider_name()
    model = agent.llm_model or providers.default_model_for(provider)
    return provider, model, agent.llm_temperature, agent.llm_max_tokens or DEFAULT_MAX_TOKENS


# Never offered to a managed run: the service meters its model calls itself, so a report of its
# own would count them twice (or book whatever the model claims).
NOT_FOR_MANAGED_RUNS = frozenset({"report_usage"})


def tool_names_of(agent) -> list[str]:
    """The tools the agent is offered: its allow-list, or every tool of the registry, less
    those no managed run is offered."""
    names = list(agent.allowed_tools) if agent.allowed_tools else sorted(registry.REGISTRY)
    return [name for name in names if name not in NOT_FOR_MANAGED_RUNS]


def prepare(run: Run, token: str) -> None:
    """Fix what the model is given, the first time the run starts."""
    if run.input:
        return
    provider, model, _, _ = llm_settings(run.agent)
    run.system_prompt, run.input, run.context = context.build(run)
    run.provider, run.model, run.max_turns = provider, model, run.agent.max_turns
    fields = ["system_prompt", "input", "context", "provider", "model", "max_turns"]
    if not update_where(
        Run, {"pk": run.pk, "lease_token": token}, **{f: getattr(run, f) for f in fields}
    ):
        raise LeaseLost


def execute(run: Run, token: str) -> None:
    agent = run.agent
    if not agent.is_managed and run.input:
        # Sent again (its worker died) after its agent was made external under way.
        _end_made_external(run, token)
        return
    if not agent.is_managed:
        services.run_finish(
            run=run,
            token=token,
            status=RunStatus.FAILED,
            error="The agent is no longer managed (its runtime is external): nothing was run.",
        )
        return
    prepare(run, token)
    if not any(t.get("status") not in FINISHED_STATUSES for t in run.context.get("tasks", [])):
        # Every task it was woken for is finished (or gone): no model call is worth making.
        services.run_finish(
            run=run,
            token=token,
            status=RunStatus.COMPLETED,
            outcome=[
                {"task": t["id"], "action": "none", "why": f"the task is {t['status']}"}
                for t in run.context.get("tasks", [])
            ],
        )
        return
    _, _, temperature, max_tokens = llm_settings(agent)
    # Offline, the runtime's deterministic routine plays the model (runtime/offline.py).
    request = LLMRequest(
        system=run.system_prompt,
        prompt=run.input,
        model=run.model,
        temperature=temperature,
        max_tokens=max_tokens,
        purpose=Purpose.RUN,
        label=agent.handle,
        offline_routine=offline.routine,
    )
    recorder = TurnRecorder(run, token)
    # Whom the run's moves wake (another managed agent) is told it was this run.
    reset = services.current_run.set(run.pk)
    try:
        result = run_tool_loop(
            caller_for_agent(agent),
            provider=run.provider,
            request=request,
            tool_names=tool_names_of(agent),
            max_turns=run.max_turns or agent.max_turns,
            complete=recorder.complete,
            on_turn=recorder,
            turns=recorder.turns or None,
            atomic_record=True,
            on_turns=recorder.record_many,
        )
        settle(run, token, result)
    finally:
        services.current_run.reset(reset)
