"""Runs one collaborative session on a Celery worker: agents, hierarchical plan, synthesis.

Why threads inside the session task rather than a chord or one Celery task per agent: chords on
Redis have open hang bugs (celery#4207, #5229), and a fan-out with a DB-counted join still needs
a second place for timeouts and max_parallel. Here one task owns the session: a bounded pool of
`max_parallel` threads runs the agents, the session thread enforces each agent's timeout, and
every step is written so that a re-delivered task (acks_late, the worker died) resumes:

- each agent has one Contribution row (unique per session and agent), claimed with a conditional
  UPDATE pending → running and settled with running → final; a finished one is never run again,
  and a late answer of an agent already marked timed out is discarded by the same condition;
- a re-delivery puts back to pending only the agents that were running when the worker died;
- a lease (token + heartbeat) keeps a second copy from running a session another worker is
  still running (it backs off and retries).
"""

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from organization.prompt import system_prompt_for

from . import providers, synthesis
from .models import (
    CollaborationSession,
    Contribution,
    ContributionStatus,
    Mode,
    SessionStatus,
    Synthesis,
)
from .providers import LLMReply, LLMRequest, ProviderError, ProviderTimeout
from .services import event_record, may_use_custom_prompt, session_finish_cancelled

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 1024
SYNTHESIS_MAX_TOKENS = 2048
POLL_SECONDS = 0.05
HEARTBEAT_SECONDS = 1.0

CLAIMED, MISSING, FINISHED, BUSY = "claimed", "missing", "finished", "busy"


@dataclass
class Slot:
    """One agent's run inside a batch, as the session thread sees it."""

    contribution: Contribution
    # time.monotonic() by which the running attempt must be over; set by the agent's thread.
    deadline: float | None = None
    future: object = None


@dataclass
class RunContext:
    session: CollaborationSession
    # Set when run_session is over: an agent not started by then never starts.
    stop: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    inflight: int = 0
    peak: int = 0
    # Tokens spent by this session so far (kept here: a query per call costs the agents time).
    tokens: int = 0

    @property
    def session_id(self):
        return self.session.pk

    @contextmanager
    def track(self):
        """Counts LLM calls in flight, for metadata.peak_parallel."""
        with self.lock:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
        try:
            yield
        finally:
            with self.lock:
                self.inflight -= 1

    def load_tokens(self) -> None:
        """What earlier runs of this session spent (a resumed session keeps its budget)."""
        agents = Contribution.objects.filter(session_id=self.session_id).aggregate(
            n=Sum("tokens_used")
        )["n"]
        self.tokens = (agents or 0) + int(self.session.metadata.get("synthesis_tokens", 0))

    def spend(self, tokens: int) -> None:
        with self.lock:
            self.tokens += tokens

    def budget_left(self) -> int:
        with self.lock:
            return self.session.max_total_tokens - self.tokens


class Heartbeat(threading.Thread):
    """Renews the session's lease and notices a cancel request while the session runs."""

    def __init__(self, ctx: RunContext, token: str):
        super().__init__(daemon=True, name=f"collab-heartbeat-{str(ctx.session_id)[:8]}")
        self.ctx, self.token = ctx, token
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.wait(HEARTBEAT_SECONDS):
                try:
                    qs = CollaborationSession.objects.filter(pk=self.ctx.session_id)
                    qs.filter(lease_token=self.token).update(heartbeat_at=timezone.now())
                    if qs.filter(cancel_requested=True).exists():
                        self.ctx.cancelled.set()
                except Exception:  # a database hiccup must not end the session
                    log.exception("collaboration heartbeat failed")
        finally:
            connection.close()

    def halt(self) -> None:
        self._halt.set()
        self.join(timeout=5)


# --- entry point ---------------------------------------------------------------------------


def run_session(session_id) -> str:
    """Run (or resume) the session; returns claimed/missing/finished/busy."""
    token = uuid.uuid4().hex
    outcome = _claim(session_id, token)
    if outcome != CLAIMED:
        return outcome
    ctx = RunContext(session=CollaborationSession.objects.get(pk=session_id))
    ctx.load_tokens()
    heartbeat = Heartbeat(ctx, token)
    heartbeat.start()
    _session_started()
    try:
        _execute(ctx)
    except Exception as exc:
        # acks_late would otherwise ack a crashed run and leave the session "running" forever.
        log.exception("collaboration session %s crashed", session_id)
        _finish(
            ctx,
            status=SessionStatus.FAILED,
            result="",
            error=internal_error(exc),
        )
    finally:
        ctx.stop.set()
        heartbeat.halt()
        _session_ended()
    return CLAIMED


def _session_started() -> None:
    global _active_sessions, _generation
    with _pool_lock:
        _active_sessions += 1
        _generation += 1


def _session_ended() -> None:
    global _active_sessions
    with _pool_lock:
        _active_sessions -= 1
        idle, generation = _active_sessions == 0, _generation
    if not idle:
        return
    idle_close = float(settings.COLLAB_IDLE_CLOSE_SECONDS)
    if idle_close <= 0:
        close_thread_connections(timeout=2.0)
        return

    def close_if_still_idle():
        with _pool_lock:
            still_idle = _active_sessions == 0 and _generation == generation
        if still_idle:
            close_thread_connections(timeout=2.0)

    timer = threading.Timer(idle_close, close_if_still_idle)
    timer.daemon = True
    timer.start()


def _claim(session_id, token: str) -> str:
    lease = settings.COLLAB_LEASE_SECONDS
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return MISSING
        if session.is_finished:
            return FINISHED
        if session.cancel_requested:
            session_finish_cancelled(session)
            return FINISHED
        now = timezone.now()
        if (
            session.lease_token
            and session.heartbeat_at
            and (now - session.heartbeat_at).total_seconds() < lease
        ):
            return BUSY
        first = session.attempts == 0
        session.attempts += 1
        session.lease_token = token
        session.heartbeat_at = now
        session.started_at = session.started_at or now
        if session.status == SessionStatus.QUEUED:
            session.status = SessionStatus.RUNNING
        session.save(
            update_fields=["attempts", "lease_token", "heartbeat_at", "started_at", "status"]
        )
        contributions = session.contributions.order_by("position")
        if first:
            event_record(
                session.id,
                "start",
                task=session.task,
                agents=[c.agent_key for c in contributions],
                mode=session.mode,
            )
        else:
            # The previous run died with these agents in flight: their answers never arrived.
            interrupted = list(
                contributions.filter(status=ContributionStatus.RUNNING).values_list(
                    "agent_key", flat=True
                )
            )
            contributions.filter(status=ContributionStatus.RUNNING).update(
                status=ContributionStatus.PENDING, started_at=None
            )
            event_record(session.id, "resume", attempt=session.attempts, rerun=interrupted)
    return CLAIMED


def _execute(ctx: RunContext) -> None:
    session = ctx.session
    contributions = list(session.contributions.select_related("agent").order_by("position"))
    if session.mode == Mode.PARALLEL:
        _run_batch(ctx, [c for c in contributions if not c.is_finished], session.max_parallel)
    elif session.mode == Mode.SEQUENTIAL:
        for c in contributions:
            if ctx.cancelled.is_set():
                break
            c.refresh_from_db(fields=["status"])
            if not c.is_finished:
                _run_batch(ctx, [c], 1)
    else:
        coordinator, specialists = contributions[0], contributions[1:]
        coordinator.refresh_from_db(fields=["status"])
        if not coordinator.is_finished:
            _run_batch(ctx, [coordinator], 1, work=_run_plan)
        _ensure_plan_outcome(ctx, coordinator)
        if not ctx.cancelled.is_set():
            pending = (
                Contribution.objects.filter(
                    pk__in=[s.pk for s in specialists], status=ContributionStatus.PENDING
                )
                .select_related("agent")
                .order_by("position")
            )
            _run_batch(ctx, list(pending), session.max_parallel)
    if ctx.cancelled.is_set():
        with transaction.atomic():
            locked = CollaborationSession.objects.select_for_update().get(pk=session.pk)
            if not locked.is_finished:
                session_finish_cancelled(locked)
        return
    _synthesize_and_finish(ctx)


# --- running agents ------------------------------------------------------------------------


def _run_batch(
    ctx: RunContext,
    contributions: list[Contribution],
    parallel: int,
    work: Callable[[RunContext, Slot], None] | None = None,
) -> None:
    """Run `contributions` at most `parallel` at a time, each within the session's agent_timeout.

    A timed-out agent is settled here, at its deadline; its thread keeps its pool slot until the
    HTTP call gives up (the transport clamps it to the same deadline), so no more than `parallel`
    calls are ever in flight.
    """
    if not contributions:
        return
    work = work or _run_agent
    slots = [Slot(c) for c in contributions]
    permits = threading.BoundedSemaphore(parallel)
    for slot in slots:
        slot.future = agent_pool().submit(_in_agent_thread, work, ctx, slot, permits)
    open_slots = list(slots)
    while open_slots:
        wait([s.future for s in open_slots], timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        still_open = []
        for slot in open_slots:
            if slot.future.done():
                continue
            if slot.deadline is not None and now > slot.deadline:
                _settle(
                    ctx,
                    slot.contribution,
                    ContributionStatus.TIMED_OUT,
                    error=f"timed out after {ctx.session.agent_timeout:g} s",
                )
                continue
            still_open.append(slot)
        open_slots = still_open
        if ctx.cancelled.is_set() and open_slots:
            # Agents not started yet see the cancel in _start and return at once.
            for slot in open_slots:
                _settle(
                    ctx,
                    slot.contribution,
                    ContributionStatus.CANCELLED,
                    error="cancelled",
                    from_statuses=(ContributionStatus.PENDING, ContributionStatus.RUNNING),
                )
            break


# One pool of agent threads per worker process, shared by its sessions: a warm thread keeps its
# database connection while the process has sessions to run (a fresh thread and connection per
# agent cost 50-250 ms on a busy machine); settings.COLLAB_IDLE_CLOSE_SECONDS after the last session
# ends they are closed, so no connection idles forever (the test suite sets it to 0 so that its
# database can be dropped).
# A batch's own semaphore bounds its concurrency to max_parallel; a hung agent keeps its permit
# until its HTTP call gives up at the deadline, so max_parallel is never exceeded.
AGENT_THREADS = 64
IDLE_CONNECTION_SECONDS = 60
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_pool_lock = threading.Lock()
_thread_state = threading.local()
_active_sessions = 0
_generation = 0


def agent_pool() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # a forked child needs its own threads
            _pool = ThreadPoolExecutor(max_workers=AGENT_THREADS, thread_name_prefix="collab-agent")
            _pool_pid = os.getpid()
        return _pool


def _fresh_connection() -> None:
    """Reuse this thread's connection, unless it sat idle long enough to have been dropped."""
    last = getattr(_thread_state, "last_used", None)
    if last is not None and time.monotonic() - last > IDLE_CONNECTION_SECONDS:
        connection.close()
    _thread_state.last_used = time.monotonic()


def _in_agent_thread(work, ctx: RunContext, slot: Slot, permits: threading.BoundedSemaphore):
    _fresh_connection()
    try:
        with permits:
            work(ctx, slot)
    except Exception:
        # The connection may be broken (e.g. the server restarted): start clean next time.
        connection.close()
        raise
    finally:
        _thread_state.last_used = time.monotonic()
        if ctx.stop.is_set() and _idle():
            # An orphan (a cancelled agent whose call outlived its session, or a timed-out one)
            # that ends after the last session: the idle close already passed this thread by.
            connection.close()


def _idle() -> bool:
    with _pool_lock:
        return _active_sessions == 0


def close_thread_connections(timeout: float = 10.0) -> None:
    """Close the database connections of the idle agent threads (tests, before dropping a DB)."""
    with _pool_lock:
        pool = _pool if _pool_pid == os.getpid() else None
    if pool is None:
        return
    count = len(pool._threads)
    if not count or pool._work_queue.qsize():
        return
    # Each thread takes exactly one task: having closed its connection it waits at the barrier.
    barrier = threading.Barrier(count)

    def close():
        connection.close()
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            pass

    wait([pool.submit(close) for _ in range(count)], timeout=timeout + 1)


def _start(ctx: RunContext, slot: Slot) -> Contribution | None:
    """Claim the contribution (pending → running); None when it is not ours to run."""
    if ctx.stop.is_set() or ctx.cancelled.is_set():
        return None
    contribution = slot.contribution
    claimed = Contribution.objects.filter(
        pk=contribution.pk, status=ContributionStatus.PENDING
    ).update(
        status=ContributionStatus.RUNNING, started_at=timezone.now(), finished_at=None, error=""
    )
    if not claimed:
        return None
    slot.deadline = time.monotonic() + ctx.session.agent_timeout
    event_record(
        ctx.session_id, "agent:start", agent=contribution.agent_key, role=contribution.role
    )
    return contribution


def _settle(
    ctx: RunContext,
    contribution: Contribution,
    status: str,
    *,
    error: str = "",
    reply: LLMReply | None = None,
    from_statuses=(ContributionStatus.RUNNING,),
    on_settled: Callable[[], None] | None = None,
) -> bool:
    """Finish a contribution once: only from `from_statuses`, so a late answer changes nothing."""
    fields = {"status": status, "error": error[:2000], "finished_at": timezone.now()}
    if reply is not None:
        fields.update(
            response=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            tokens_used=reply.tokens_used,
            attempts=reply.attempts,
            provider=reply.provider,
            model=reply.model,
            verdict=synthesis.parse_verdict(reply.text),
            confidence=synthesis.parse_confidence(reply.text),
        )
    with transaction.atomic():
        settled = Contribution.objects.filter(pk=contribution.pk, status__in=from_statuses).update(
            **fields
        )
        if not settled:
            return False
        if status == ContributionStatus.COMPLETED:
            event_record(
                ctx.session_id,
                "agent:complete",
                agent=contribution.agent_key,
                tokens=reply.tokens_used if reply else 0,
            )
        else:
            event_record(
                ctx.session_id,
                "agent:failed",
                agent=contribution.agent_key,
                role=contribution.role,
                status=status,
                error=error[:500],
            )
        if on_settled is not None:
            on_settled()
    return True


def coordinator_model_for(provider: str) -> str:
    """COLLAB_COORDINATOR_MODEL on the default provider (as LLM_MODEL is the agents'), else the
    provider's default model."""
    if settings.COLLAB_COORDINATOR_MODEL and provider == providers.default_provider_name():
        return settings.COLLAB_COORDINATOR_MODEL
    return providers.default_model_for(provider)


def _llm_settings(
    contribution: Contribution, *, coordinator: bool = False
) -> tuple[str, str, float | None, int]:
    """Provider, model, temperature and max_tokens: session config, then the agent's own, then
    defaults (a coordinating agent's default model is the coordinator's)."""
    config, agent = contribution.config or {}, contribution.agent
    provider = (
        config.get("provider")
        or (agent.llm_provider if agent else "")
        or providers.default_provider_name()
    )
    model = config.get("model")
    if not model and agent and agent.llm_model:
        agent_provider = agent.llm_provider or providers.default_provider_name()
        model = agent.llm_model if agent_provider == provider else None
    default_model = coordinator_model_for if coordinator else providers.default_model_for
    model = model or default_model(provider)
    temperature = config.get("temperature")
    if temperature is None and agent is not None:
        temperature = agent.llm_temperature
    max_tokens = config.get("max_tokens") or (agent.llm_max_tokens if agent else None)
    return provider, model, temperature, max_tokens or DEFAULT_MAX_TOKENS


def _system_prompt(session: CollaborationSession, contribution: Contribution) -> str:
    """An org agent's prompt (its custom prompt if the starter may read it + organizational
    context); an ad-hoc one's config."""
    agent = contribution.agent
    if agent is not None:
        expertise = ", ".join(agent.expertise) or "(none listed)"
        custom = may_use_custom_prompt(session, agent)
        return (
            f"{system_prompt_for(agent, include_custom=custom)}\n## THIS COLLABORATIVE SESSION\n\n"
            f"You are {agent.name} ({agent.role or 'no job title'}), taking part as the "
            f"{contribution.role} specialist. Your expertise: {expertise}.\n"
        )
    custom = (contribution.config or {}).get("system_prompt")
    return custom or (
        f"You are {contribution.display_name or contribution.agent_key}, a {contribution.role} "
        "specialist taking part in a collaborative session with other specialists."
    )


def _answers(contributions) -> list[synthesis.Answer]:
    return [
        synthesis.Answer(
            agent=c.agent_key,
            role=c.role,
            response=c.response,
            confidence=c.confidence,
            verdict=c.verdict,
            position=c.position,
        )
        for c in contributions
    ]


def _call(ctx: RunContext, provider: str, request: LLMRequest) -> LLMReply:
    budget = ctx.budget_left()
    if budget <= 0:
        raise ProviderError(
            f"token budget exhausted ({ctx.session.max_total_tokens} tokens for this session)"
        )
    request.max_tokens = max(1, min(request.max_tokens, budget))
    with ctx.track():
        reply = providers.complete(provider, request)
    ctx.spend(reply.tokens_used)
    return reply


def _run_agent(ctx: RunContext, slot: Slot) -> None:
    try:
        contribution = _start(ctx, slot)
        if contribution is None:
            return
        session = ctx.session
        subtask, note = "", ""
        previous = []
        if session.mode == Mode.SEQUENTIAL:
            previous = _answers(
                Contribution.objects.filter(
                    session=session,
                    position__lt=contribution.position,
                    status=ContributionStatus.COMPLETED,
                ).order_by("position")
            )
        elif session.mode == Mode.HIERARCHICAL:
            # A valid plan skips the specialists it leaves out, so no subtask means the fallback.
            subtask = contribution.subtask
            if not subtask:
                note = (
                    "The coordinator's plan could not be used: work on the whole task from "
                    "your perspective."
                )
        provider, model, temperature, max_tokens = _llm_settings(contribution)
        request = LLMRequest(
            system=_system_prompt(session, contribution),
            prompt=synthesis.agent_prompt(
                task=session.task,
                role=contribution.role,
                focus=contribution.focus,
                context=session.context,
                previous=previous,
                ask_verdict=session.synthesis == Synthesis.VOTE,
                subtask=subtask,
                whole_task_note=note,
            ),
            model=model,
            temperature=temperature,
            max_tokens=max_tokens,
            deadline=slot.deadline,
            purpose="agent",
            label=contribution.agent_key,
            hints={
                "task": subtask or session.task,
                "focus": contribution.focus,
                "role": contribution.role,
            },
        )
        reply = _call(ctx, provider, request)
        _settle(ctx, slot.contribution, ContributionStatus.COMPLETED, reply=reply)
    except Exception as exc:
        _settle_failure(ctx, slot, exc)


def internal_error(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


def _settle_failure(ctx: RunContext, slot: Slot, exc: BaseException) -> None:
    """An agent's call ended in `exc`: timed out, failed at the provider, or a bug (logged)."""
    if isinstance(exc, ProviderTimeout):
        status, error = ContributionStatus.TIMED_OUT, str(exc)
    elif isinstance(exc, ProviderError):
        status, error = ContributionStatus.FAILED, str(exc)
    else:
        log.exception("collaboration agent %s crashed", slot.contribution.agent_key)
        status, error = ContributionStatus.FAILED, internal_error(exc)
    _settle(ctx, slot.contribution, status, error=error)


# --- hierarchical plan -----------------------------------------------------------------------


def session_metadata(ctx: RunContext) -> dict:
    return (
        CollaborationSession.objects.filter(pk=ctx.session_id)
        .values_list("metadata", flat=True)
        .first()
        or {}
    )


def _merge_metadata(session_id, **values) -> None:
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().get(pk=session_id)
        session.metadata = {**session.metadata, **values}
        session.save(update_fields=["metadata"])


def _run_plan(ctx: RunContext, slot: Slot) -> None:
    """The coordinator's JSON plan: validated, retried once, else every specialist gets the task."""
    try:
        coordinator = _start(ctx, slot)
        if coordinator is None:
            return
        session = ctx.session
        specialists = list(
            Contribution.objects.filter(session=session, position__gt=0).order_by("position")
        )
        names = [s.agent_key for s in specialists]
        roster = [{"name": s.agent_key, "role": s.role, "focus": s.focus} for s in specialists]
        provider, model, temperature, max_tokens = _llm_settings(coordinator, coordinator=True)
        replies: list[LLMReply] = []
        plan, why, failure = None, "", None
        for attempt in (1, 2):
            if attempt == 2:
                slot.deadline = time.monotonic() + session.agent_timeout
            request = LLMRequest(
                system=_system_prompt(session, coordinator),
                prompt=synthesis.plan_prompt(
                    task=session.task,
                    context=session.context,
                    specialists=roster,
                    focus=coordinator.focus,
                    error=why,
                ),
                model=model,
                temperature=temperature,
                max_tokens=max(max_tokens, SYNTHESIS_MAX_TOKENS),
                deadline=slot.deadline,
                purpose="plan",
                label=coordinator.agent_key,
                hints={"task": session.task, "specialists": roster},
            )
            try:
                replies.append(_call(ctx, provider, request))
            except ProviderError as exc:
                failure = exc
                break
            plan, why = synthesis.parse_plan(replies[-1].text, names)
            if plan is not None:
                break
        if not replies:
            _settle_failure(ctx, slot, failure)
            return
        combined = LLMReply(
            # Seed 004: the coordinator's contribution is its plan; the raw answer stays only
            # when it was rejected (it is what the coordinator said).
            text=synthesis.plan_text(plan) if plan else replies[-1].text,
            prompt_tokens=sum(r.prompt_tokens for r in replies),
            completion_tokens=sum(r.completion_tokens for r in replies),
            attempts=sum(r.attempts for r in replies),
            provider=replies[-1].provider,
            model=replies[-1].model,
        )
        reason = why or (str(failure) if failure else "")
        outcome = {
            "valid": plan is not None,
            "tries": len(replies),
            "fallback": plan is None,
            "reason": reason,
            "plan": plan["plan"] if plan else "",
            "assignments": plan["assignments"] if plan else {},
            "unassigned": [n for n in names if n not in plan["assignments"]] if plan else names,
        }

        def record_plan():
            # In the coordinator's settle transaction: a re-delivery finds both or neither.
            for s in specialists:
                Contribution.objects.filter(pk=s.pk).update(
                    subtask=(plan or {}).get("assignments", {}).get(s.agent_key, "")
                )
            if plan:
                _skip_unassigned(ctx, outcome["unassigned"])
            _record_plan(ctx, outcome)

        _settle(
            ctx,
            slot.contribution,
            ContributionStatus.COMPLETED,
            reply=combined,
            error="" if plan else f"plan rejected: {reason}",
            on_settled=record_plan,
        )
    except Exception as exc:
        _settle_failure(ctx, slot, exc)


def _skip_unassigned(ctx: RunContext, names: list[str]) -> None:
    """Seed 004 runs only the specialists the plan assigns: the others are `skipped`."""
    for name in names:
        skipped = Contribution.objects.filter(
            session_id=ctx.session_id, agent_key=name, status=ContributionStatus.PENDING
        ).update(
            status=ContributionStatus.SKIPPED,
            error="not assigned by the coordinator's plan",
            finished_at=timezone.now(),
        )
        if skipped:
            event_record(ctx.session_id, "agent:skipped", agent=name, reason="not in the plan")


def _ensure_plan_outcome(ctx: RunContext, coordinator: Contribution) -> None:
    """A coordinator that failed or timed out leaves no plan: record the fallback once."""
    if "plan" in session_metadata(ctx):
        return
    coordinator.refresh_from_db(fields=["status", "error"])
    if coordinator.status in (ContributionStatus.PENDING, ContributionStatus.RUNNING):
        return  # cancelled before the coordinator finished
    reason = f"the coordinator {coordinator.status}: {coordinator.error}".strip(": ")
    _record_plan(
        ctx,
        {"valid": False, "tries": 0, "fallback": True, "reason": reason, "plan": "",
         "assignments": {}, "unassigned": []},
    )  # fmt: skip


def _record_plan(ctx: RunContext, outcome: dict) -> None:
    """metadata.plan, and the `fallback` event when the specialists get the whole task."""
    _merge_metadata(ctx.session_id, plan=outcome)
    if outcome["fallback"]:
        event_record(
            ctx.session_id,
            "fallback",
            stage="plan",
            reason=outcome["reason"],
            action="every specialist gets the whole task",
        )


# --- synthesis -------------------------------------------------------------------------------


def _coordinator_settings(session: CollaborationSession) -> tuple[str, str, float | None, int]:
    """coordinator_config, else (hierarchical) the coordinating agent's settings, else defaults."""
    config = session.coordinator_config or {}
    if not config and session.mode == Mode.HIERARCHICAL:
        first = session.contributions.select_related("agent").order_by("position").first()
        provider, model, temperature, max_tokens = _llm_settings(first, coordinator=True)
        return provider, model, temperature, max(max_tokens, SYNTHESIS_MAX_TOKENS)
    provider = config.get("provider") or providers.default_provider_name()
    model = config.get("model") or coordinator_model_for(provider)
    temperature = config.get("temperature", settings.COLLAB_COORDINATOR_TEMPERATURE)
    return provider, model, temperature, config.get("max_tokens") or SYNTHESIS_MAX_TOKENS


def _coordinator_call(ctx: RunContext, purpose: str, prompt: str, hints: dict) -> LLMReply:
    session = ctx.session
    provider, model, temperature, max_tokens = _coordinator_settings(session)
    deadline = time.monotonic() + session.agent_timeout
    request = LLMRequest(
        system="You are the coordinator of a collaborative session of specialist agents.",
        prompt=prompt,
        model=model,
        temperature=temperature,
        max_tokens=max_tokens,
        deadline=deadline,
        purpose=purpose,
        label="coordinator",
        hints=hints,
    )
    # The SDK call runs in this thread: the transport clamps every attempt to the deadline.
    reply = _call(ctx, provider, request)
    _add_synthesis_tokens(ctx.session_id, reply.tokens_used)
    return reply


def _add_synthesis_tokens(session_id, tokens: int) -> None:
    """Count a coordinator call's tokens under the session's lock (two runs of a resumed session
    may both synthesize); if the other run has already finished the session, its total grows too."""
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().get(pk=session_id)
        metadata = dict(session.metadata)
        metadata["synthesis_tokens"] = int(metadata.get("synthesis_tokens", 0)) + tokens
        if session.is_finished:
            metadata["total_tokens"] = int(metadata.get("total_tokens", 0)) + tokens
        session.metadata = metadata
        session.save(update_fields=["metadata"])


def _synthesize_and_finish(ctx: RunContext) -> None:
    session = CollaborationSession.objects.get(pk=ctx.session_id)
    ctx.session = session
    contributions = list(session.contributions.order_by("position"))
    considered = contributions[1:] if session.mode == Mode.HIERARCHICAL else contributions
    answers = _answers(c for c in considered if c.status == ContributionStatus.COMPLETED)
    # A specialist the plan left out did not fail: it was not needed.
    failures = [
        f"{c.agent_key}: {c.error or c.status}"
        for c in contributions
        if c.status not in (ContributionStatus.COMPLETED, ContributionStatus.SKIPPED)
    ]
    if not answers:
        reasons = "; ".join(failures)
        _finish(
            ctx, status=SessionStatus.FAILED, result="", error=f"every agent failed — {reasons}"
        )
        return
    CollaborationSession.objects.filter(
        pk=session.pk, status__in=[SessionStatus.RUNNING, SessionStatus.SYNTHESIZING]
    ).update(status=SessionStatus.SYNTHESIZING)
    event_record(session.pk, "synthesis:start", strategy=session.synthesis)
    consensus = synthesis.consensus_of(answers)
    extra: dict = {}
    degraded = ""
    strategy = session.synthesis
    if strategy == Synthesis.MERGE:
        result = synthesis.merge_result(answers)
    elif strategy == Synthesis.VOTE:
        result = synthesis.vote_result(answers, consensus)
    elif strategy == Synthesis.BEST_OF:
        result, extra = _best_of(ctx, answers)
    else:
        try:
            reply = _coordinator_call(
                ctx,
                "synthesis",
                synthesis.synthesis_prompt(session.task, answers),
                {
                    "contributions": [
                        {"agent": a.agent, "summary": synthesis.first_sentence(a.response)}
                        for a in answers
                    ]
                },
            )
            result = reply.text
        except ProviderError as exc:
            degraded = f"coordinator synthesis failed: {exc}"
            event_record(session.pk, "fallback", stage="synthesis", reason=str(exc), action="merge")
            result = synthesis.merge_result(answers)
    status = SessionStatus.PARTIAL if failures or degraded else SessionStatus.COMPLETED
    error = "; ".join(failures + ([degraded] if degraded else []))
    _finish(ctx, status=status, result=result, error=error, consensus=consensus, extra=extra)


def _best_of(ctx: RunContext, answers: list[synthesis.Answer]) -> tuple[str, dict]:
    """Highest confidence; a tie goes to a coordinator judgement when configured, else the earliest."""
    candidates = synthesis.best_of_candidates(answers)
    chosen, how = None, "highest confidence"
    if len(candidates) > 1:
        if ctx.session.coordinator_config:
            names = [a.agent for a in candidates]
            try:
                reply = _coordinator_call(
                    ctx,
                    "judge",
                    synthesis.judge_prompt(ctx.session.task, candidates),
                    {"candidates": names},
                )
                picked = synthesis.parse_best(reply.text, names)
                chosen = next((a for a in candidates if a.agent == picked), None)
                how = "tie broken by the coordinator"
            except ProviderError as exc:
                event_record(
                    ctx.session_id, "fallback", stage="best_of", reason=str(exc), action="earliest"
                )
        if chosen is None:
            chosen = min(candidates, key=lambda a: a.position)
            how = "tie broken by order: the earliest"
    else:
        chosen = candidates[0]
    info = {"agent": chosen.agent, "confidence": chosen.confidence, "how": how,
            "tied": [a.agent for a in candidates] if len(candidates) > 1 else []}  # fmt: skip
    return synthesis.best_of_result(chosen, len(answers), how), {"best_of": info}


def _finish(
    ctx: RunContext,
    *,
    status: str,
    result: str,
    error: str = "",
    consensus: dict | None = None,
    extra: dict | None = None,
) -> None:
    """Write the outcome and the `complete` event once, whichever run gets here first."""
    with transaction.atomic():
        session = CollaborationSession.objects.select_for_update().get(pk=ctx.session_id)
        if session.is_finished:
            return
        now = timezone.now()
        contributions = list(session.contributions.order_by("position"))
        agent_tokens = sum(c.tokens_used for c in contributions)
        synthesis_tokens = int(session.metadata.get("synthesis_tokens", 0))
        metadata = {
            **session.metadata,
            "agents_count": len(contributions),
            "mode": session.mode,
            "synthesis": session.synthesis,
            "total_tokens": agent_tokens + synthesis_tokens,
            "agent_tokens": agent_tokens,
            "synthesis_tokens": synthesis_tokens,
            "duration_ms": int((now - (session.started_at or now)).total_seconds() * 1000),
            "agent_durations_ms": {c.agent_key: c.duration_ms for c in contributions},
            "agents_completed": sum(
                c.status == ContributionStatus.COMPLETED for c in contributions
            ),
            "attempts": session.attempts,
            "peak_parallel": max(int(session.metadata.get("peak_parallel", 0)), ctx.peak),
            "limits": {
                "max_parallel": session.max_parallel,
                "agent_timeout": session.agent_timeout,
                "max_total_tokens": session.max_total_tokens,
            },
            **(extra or {}),
        }
        session.status = status
        session.result = result
        session.error = error[:5000]
        session.consensus = consensus or synthesis.consensus_of([])
        session.metadata = metadata
        session.finished_at = now
        session.save(
            update_fields=["status", "result", "error", "consensus", "metadata", "finished_at"]
        )
        event_record(
            session.pk,
            "complete",
            status=status,
            agents_count=len(contributions),
            total_tokens=metadata["total_tokens"],
        )
