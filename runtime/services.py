"""Writes of the runtime: wake a managed agent, resume it, finish a run, sweep stale runs.

The agent's row is the lock of its runs: every change of which run an agent has — a wake-up
starting or joining one, a run ending and starting its follow-up — takes it first (then the run's
row), so two triggers racing for one agent, or a trigger racing the run's end, are serialized.
The database holds the rule too: at most one queued or running run per agent
(`one_active_run_per_agent`). Runs are queued on Celery by name through the outbox (never lost
when the broker is away); the runner (runner.py) claims them with a lease. A wake-up another
run's act caused is held past the bounds of wake chains, for a human to release
(docs/runtime.md, "Why wake chains are bounded this way").
"""

from __future__ import annotations

import contextvars
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Exists, F, Max, Min, OuterRef, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from costs.alerts import raise_exhausted
from costs.budgets import blocking_budget
from costs.metering import period_of
from infrastructure import outbox
from infrastructure.prepared import INT, PreparedInstances, insert_new
from organization.models import Agent, AgentRuntime
from tasks.models import HELD_STATUSES, InboxItem, Task, TaskStatus
from tasks.rules import NO_KEY
from tasks.signals import WAKING_KINDS

from . import sql
from .models import (
    ACTIVE_STATUSES,
    RESUMED,
    RUN_AGENT_TASK,
    HeldReason,
    Run,
    RunStatus,
    RunTrigger,
    RunTurn,
)

log = logging.getLogger(__name__)

# The run whose tool call is being executed in this thread (set by the runner): a wake-up it
# causes records it as `woken_by`.
current_run: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "current_run", default=None
)


# A wake-up is the runtime's hottest path (every move that reaches a managed agent): its two
# locking reads are compiled once per process, and read only what the runtime uses; any other
# field of these rows is read when first used (infrastructure/prepared.py).
_LOCK_AGENT = PreparedInstances(
    Agent,
    ("id", "organization_id", "team_id", "handle", "runtime", "is_paused"),
    lambda agent_id: Agent.objects.select_for_update(**NO_KEY).filter(pk=agent_id).order_by(),
    agent_id=INT,
)
_LOCK_ACTIVE_RUN = PreparedInstances(
    Run,
    ("id", "agent_id", "status", "attempts"),
    lambda agent_id: (
        Run.objects.select_for_update(of=("self",), **NO_KEY)
        .filter(agent_id=agent_id, status__in=ACTIVE_STATUSES)
        .order_by("pk")[:1]
    ),
    agent_id=INT,
)


def _locked_agent(agent_id: int) -> Agent | None:
    return next(iter(_LOCK_AGENT.instances(agent_id=agent_id)), None)


def _active_run(agent: Agent) -> Run | None:
    """The agent's queued or running run, its row locked (the agent's row is locked already)."""
    return next(iter(_LOCK_ACTIVE_RUN.instances(agent_id=agent.pk)), None)


@dataclass(frozen=True)
class Cause:
    """The run whose act woke an agent, as the bounds read it: its depth in its chain of
    wake-ups, and how many runs the woken agent had in the last hour (up to the bound)."""

    run_id: int
    depth: int
    agent_runs_this_hour: int


def _lock_for_wake(agent_id: int, woken_by: int | None) -> tuple[Agent | None, bool, Cause | None]:
    """(the agent, its row locked, with `has_reports`; whether its organization has any
    budget; the Cause when a run's act woke it), one statement on PostgreSQL. Its active run
    is read by a statement of its own, after the lock: one that began before another wake-up
    committed a new run would not see that run."""
    if connection.vendor != "postgresql":
        agent = _locked_agent(agent_id)
        if agent is None or woken_by is None:
            return agent, True, None
        depth = Run.objects.filter(pk=woken_by).values_list("depth", flat=True).first()
        recent = Run.objects.filter(agent_id=agent_id, created_at__gte=_hour_ago())
        runs = recent[: settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR].count()
        return agent, True, Cause(woken_by, depth or 0, runs)
    caused = woken_by is not None
    params = [woken_by, _hour_ago(), settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR] if caused else []
    with connection.cursor() as cursor:
        cursor.execute(
            sql.wake_read(connection, _LOCK_AGENT.fields, caused=caused), [*params, agent_id]
        )
        row = cursor.fetchone()
    if row is None:
        return None, False, None
    width = len(_LOCK_AGENT.fields)
    agent = Agent.from_db(connection.alias, _LOCK_AGENT.fields, row[:width])
    agent.has_reports = row[width]
    cause = Cause(woken_by, row[width + 2] or 0, row[width + 3]) if caused else None
    return agent, row[width + 1], cause


def _hour_ago() -> datetime:
    return timezone.now() - timedelta(hours=1)


# A run's priority on the broker (Redis takes 0 first): a manager's run goes before its reports'
# — what it hands out is what keeps them busy; an expert's run waiting a little costs nobody.
MANAGER_PRIORITY = 0
REPORT_PRIORITY = 6


def run_priority(agent_id: int, has_reports: bool | None = None) -> int:
    """The priority of the agent's runs: MANAGER_PRIORITY when someone reports to it."""
    if has_reports is None:
        has_reports = Agent.objects.filter(senior_id=agent_id).exists()
    return MANAGER_PRIORITY if has_reports else REPORT_PRIORITY


def _dispatch(run: Run) -> None:
    """Queue the run's Celery task through the outbox (sent when the transaction commits)."""
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    outbox.enqueue(RUN_AGENT_TASK, run.pk, priority=run_priority(run.agent_id))


def _new_run(
    agent: Agent, *, task_id: int | None, trigger: str, depth: int, previous: Run | None = None
) -> Run:
    """A queued run, sent to the workers through the outbox when the transaction commits;
    `depth`: that of the run whose act woke it (0: none did), which this one follows."""
    run = Run(
        organization_id=agent.organization_id, agent=agent, task_id=task_id, trigger=trigger,
        previous=previous, dispatched_at=timezone.now(), depth=depth + 1,
    )  # fmt: skip
    insert_new(run)
    priority = run_priority(agent.pk, getattr(agent, "has_reports", None))
    outbox.enqueue(RUN_AGENT_TASK, run.pk, priority=priority)
    return run


def _start_run(agent: Agent, waiting: list[RunTrigger], previous: Run | None = None) -> Run:
    """A queued run for the waiting triggers (the first names its task and trigger), dispatched;
    as deep in its chain as the shallowest of them allows (a fresh request starts one anew)."""
    first = waiting[0]
    depth = min(t.depth for t in waiting)
    run = _new_run(
        agent, task_id=first.task_id, trigger=first.trigger, depth=depth, previous=previous
    )
    RunTrigger.objects.filter(pk__in=[t.pk for t in waiting]).update(run=run)
    return run


def _as_shallow_as(run: Run, depth: int) -> None:
    """A queued run taking a wake-up of a chain `depth` runs long is no deeper than a run that
    wake-up would start: a human's act joining a deep chain's run gives it a fresh chain."""
    Run.objects.filter(pk=run.pk, depth__gt=depth + 1).update(depth=depth + 1)


COMMENT = "comment"
AGENT_TALK_WINDOW = timedelta(hours=1)


def _agents_talking_too_much(task: Task | None) -> bool:
    """A comment written by a managed agent's run, on a task whose comments have already woken
    managed agents RUNTIME_MAX_AGENT_COMMENT_WAKES times this hour."""
    if task is None:
        return False
    wakes = RunTrigger.objects.filter(
        task=task, trigger=COMMENT, woken_by__isnull=False,
        created_at__gte=timezone.now() - AGENT_TALK_WINDOW,
    ).count()  # fmt: skip
    return wakes >= settings.RUNTIME_MAX_AGENT_COMMENT_WAKES


def _bound_passed(cause: Cause | None, trigger: str, task: Task | None) -> str:
    """The bound a wake-up caused by another run's act would pass (a HeldReason), or "".
    A human's or an outside agent's act is never held: it starts a chain of its own."""
    if cause is None:
        return ""
    if cause.depth >= settings.RUNTIME_MAX_CHAIN_RUNS:
        return HeldReason.CHAIN
    if cause.agent_runs_this_hour >= settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR:
        return HeldReason.AGENT_HOUR
    if trigger == COMMENT and _agents_talking_too_much(task):
        return HeldReason.COMMENTS
    return ""


def held_for_budget(agent: Agent) -> bool:
    """No budget left for the agent: its work waits, and the humans see the budget's exhausted
    alert in "Needs attention" (raised once per period, here if no refused call raised it)."""
    budget = blocking_budget(agent)
    if budget is not None:
        raise_exhausted(budget, period_of(budget))
    return budget is not None


_WAITING = PreparedInstances(
    RunTrigger,
    ("id", "task_id", "trigger", "depth"),
    lambda agent_id: RunTrigger.objects.filter(
        agent_id=agent_id, run__isnull=True, held=""
    ).order_by("pk"),
    agent_id=INT,
)


def _waiting(agent: Agent) -> list[RunTrigger]:
    """The agent's triggers that wait for a run, not held (read at every run's end: compiled
    once)."""
    return _WAITING.instances(agent_id=agent.pk)


def _trigger_with_active_run(agent: Agent, trigger: str, task: Task | None, cause: Cause | None):
    """On PostgreSQL, the trigger recorded with the agent's active run in one statement (after
    the agent's lock, by a statement of its own: it sees every run committed before that lock):
    joining the run when it is queued, waiting for its end when it runs. `(run or None,)` when
    the agent had an active run; None, writing nothing, when it had none.

    Only a queued run's row is locked (its claim locks it too: the trigger joins the run before
    the claim reads its triggers, or finds it running and waits). A running run's row is not:
    the agent's lock already orders this trigger before the run's end reads what waits, and the
    run writes its row at every turn — a busy agent's run would otherwise wait on each wake-up
    the moves of other agents send it."""
    joined_depth = (cause.depth if cause else 0) + 1
    with connection.cursor() as cursor:
        cursor.execute(sql.trigger_with_active_run(connection), [
            agent.pk, RunStatus.QUEUED, joined_depth, joined_depth, agent.pk,
            list(ACTIVE_STATUSES), agent.organization_id,
            agent.pk, task.pk if task is not None else None, trigger,
            cause.run_id if cause else None, cause.depth if cause else 0, timezone.now(),
        ])  # fmt: skip
        row = cursor.fetchone()
    if row is None:
        return None
    if row[0] is None:
        return (None,)
    return (Run.from_db(connection.alias, ("id", "agent_id", "status"),
                        (row[0], agent.pk, RunStatus.QUEUED)),)  # fmt: skip


@transaction.atomic
def run_wake(*, agent: Agent, trigger: str, task: Task | None) -> Run | None:
    """Work reached a managed agent: start a run, join its queued one, or (while it runs, or is
    paused) wait for the next. Returns the run it started or joined, None when it waits or the
    agent is not managed.

    A wake-up another run's act caused is held instead — recorded with the bound it would pass,
    taken by no run until a human releases it (run_release) — past a bound of wake chains
    (`_bound_passed`: the chain's length and the agent's runs this hour read with its lock).

    The hot path of every move that reaches a managed agent: a handful of statements. Nothing
    waits while the agent has no run and is not paused (what waited while it was paused joined
    the run its resume started), so the trigger goes straight into the run it starts."""
    agent, budgets, cause = _lock_for_wake(agent.pk, current_run.get())
    if agent is None or not agent.is_managed:
        return None
    depth = cause.depth if cause else 0
    if held := _bound_passed(cause, trigger, task):
        log.warning("%s not woken about task %s: %s", agent.handle, task and task.pk, held)
        insert_new(
            RunTrigger(
                organization_id=agent.organization_id,
                agent=agent,
                task=task,
                trigger=trigger,
                woken_by_id=cause.run_id,
                depth=depth,
                held=held,
            )
        )
        return None
    task_id = task.pk if task else None
    if agent.is_paused or (budgets and held_for_budget(agent)):
        # It waits: resuming the agent, or room in its budget, wakes it (run_resume).
        run = None
    elif connection.vendor == "postgresql":
        if (found := _trigger_with_active_run(agent, trigger, task, cause)) is not None:
            return found[0]  # joined its queued run, or waits for its running one's end
        run = _new_run(agent, task_id=task_id, trigger=trigger, depth=depth)
    elif (active := _active_run(agent)) is None:
        run = _new_run(agent, task_id=task_id, trigger=trigger, depth=depth)
    elif active.status == RunStatus.QUEUED and not active.attempts:
        # Not started yet: it reads this task too when it starts (its row lock orders this
        # before or after the claim, never in between). One handed back by a pause has its
        # input already: the trigger waits for its end, as for a running one.
        run = active
        _as_shallow_as(run, depth)
    else:
        run = None  # coalesced: the run's end starts one follow-up with every waiting trigger
    insert_new(RunTrigger(
        organization_id=agent.organization_id, agent=agent, run=run, task=task, trigger=trigger,
        woken_by_id=cause.run_id if cause else None, depth=depth,
    ))  # fmt: skip
    return run


def unseen_since_assigned(agent_field: str) -> Exists:
    """A task (of the outer query) `agent_field` holds has no trigger for it since it was
    assigned: no run of that agent was ever woken for it (a task a run saw and left assigned —
    a question asked in a comment — has one). A trigger whose run failed before its input was
    built (its agent had been made external: nothing was run), or stopped under way because its
    agent was made external (its tasks left as they were), saw nothing."""
    return ~Exists(
        RunTrigger.objects.filter(
            agent_id=OuterRef(agent_field),
            task_id=OuterRef("pk"),
            created_at__gte=OuterRef("assigned_at"),
        ).exclude(
            Q(run__status=RunStatus.FAILED) & (Q(run__input="") | Q(run__error=MADE_EXTERNAL))
        )
    )


@transaction.atomic
def run_resume(*, agent_id: int) -> Run | None:
    """A managed agent was resumed (or given room): wake it if work is waiting — triggers that
    arrived while it was paused or out of budget, or tasks it holds, never started (`assigned`)
    and no run was ever woken for (assigned while it was external, or its wake-up was lost).
    An agent whose runs saw all it holds has nothing new: a change of its capacity, runtime or
    budget does not wake it."""
    agent = _locked_agent(agent_id)
    if agent is None or not agent.is_managed or agent.is_paused:
        return None
    if held_for_budget(agent):
        return None  # still no room: budget_made_room wakes it when there is
    active = _active_run(agent)
    if active is not None:
        if active.status == RunStatus.QUEUED:
            # Held while the agent was paused: it takes what arrived meanwhile (unless a pause
            # stopped it under way: its input is fixed, what arrived waits for its end), and
            # goes now.
            if not active.attempts:
                joining = RunTrigger.objects.filter(agent=agent, run__isnull=True, held="")
                depths = list(joining.values_list("depth", flat=True))
                if depths:
                    joining.update(run=active)
                    _as_shallow_as(active, min(depths))
            _dispatch(active)
        return active
    waiting = _waiting(agent)
    known = {t.task_id for t in waiting}
    fresh = (
        Task.objects.filter(assignee=agent, status=TaskStatus.ASSIGNED)
        .filter(unseen_since_assigned("assignee_id"))
        .exclude(pk__in=[pk for pk in known if pk is not None])
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )
    waiting += RunTrigger.objects.bulk_create(
        RunTrigger(organization_id=agent.organization_id, agent=agent, task_id=pk, trigger=RESUMED)
        for pk in fresh
    )
    if not waiting:
        return None
    return _start_run(agent, waiting)


def held_wakes(*, organization_id: int, task_id: int | None = None, agent_ids=None):
    """The wake-ups a bound holds in the organization (of a task, of agents), oldest first."""
    held = RunTrigger.objects.filter(organization_id=organization_id).exclude(held="")
    if task_id is not None:
        held = held.filter(task_id=task_id)
    if agent_ids is not None:
        held = held.filter(agent_id__in=agent_ids)
    return held.order_by("pk")


def run_release(*, organization_id: int, task_id: int | None = None, agent_ids=None) -> int:
    """A human lifts the bound: the held wake-ups (of a task, of agents) wake their agents as a
    human's act does — each starts a chain of its own — joining or starting a run as any
    wake-up (a paused agent's, or one out of budget, waits as usual). Returns how many."""
    released = 0
    held = held_wakes(organization_id=organization_id, task_id=task_id, agent_ids=agent_ids)
    for agent_id in sorted(set(held.values_list("agent_id", flat=True))):
        with transaction.atomic():
            if _locked_agent(agent_id) is None:
                continue
            released += held.filter(agent_id=agent_id).update(
                held="", depth=0, released_at=timezone.now()
            )
            run_resume(agent_id=agent_id)
    if released:
        log.info("released %s held wake-up(s) in organization %s", released, organization_id)
    return released


@transaction.atomic
def run_finish(
    *, run: Run, token: str, status: str, error: str = "", outcome: list | None = None
) -> Run | None:
    """End the run (if `token` still holds its lease) and start its follow-up when triggers
    waited meanwhile. Returns the run as ended, None if the lease was lost."""
    agent = _locked_agent(run.agent_id)
    ended = {"status": status, "error": error, "finished_at": timezone.now(), "lease_token": ""}
    if outcome is not None:
        ended["outcome"] = outcome
    # One statement, which locks the run's row (after the agent's) as it ends it: the run's
    # row is neither read back nor written whole (its input and context are large).
    if not Run.objects.filter(pk=run.pk, lease_token=token, status__in=ACTIVE_STATUSES).update(
        **ended
    ):
        return None
    for name, value in ended.items():
        setattr(run, name, value)
    if agent is not None and agent.is_managed and not agent.is_paused:
        waiting = _waiting(agent)
        # Out of budget, the triggers wait as a paused agent's do: room in the budget wakes it
        # (wake_after_budget). Read only when something waits: most runs end with nothing.
        if waiting and not held_for_budget(agent):
            _start_run(agent, waiting, previous=run)
    return run


@dataclass(frozen=True)
class Recorded:
    """A record the run wrote under its lease; `agent_paused`: its agent is paused now (a human
    paused it while the run was under way: it stops before its next model call);
    `agent_external`: its agent was made external meanwhile (it stops there too, and ends)."""

    agent_paused: bool
    agent_external: bool = False


# Why a run whose agent was made external while it was under way ended (runner.py): its tasks
# were left as they were, so they count as seen by no run (`unseen_since_assigned`).
MADE_EXTERNAL = (
    "The agent was made external while its run was under way: the run stopped before its next "
    "model call, its tasks left as they were."
)


def _recorded(paused, runtime) -> Recorded:
    return Recorded(agent_paused=bool(paused), agent_external=runtime != AgentRuntime.MANAGED)


def run_record_turn(
    *, run: Run, token: str, turn: dict, prompt_tokens: int, completion_tokens: int
) -> Recorded | None:
    """Write one turn (by its index) with the run's tokens so far, and renew the lease; False,
    writing nothing, when the lease was lost (`run_record_turns`)."""
    return run_record_turns(run=run, token=token, turns=[turn], prompt_tokens=prompt_tokens,
                            completion_tokens=completion_tokens)  # fmt: skip


def run_record_turns(
    *, run: Run, token: str, turns: list[dict], prompt_tokens: int, completion_tokens: int
) -> Recorded | None:
    """Write turns (by their index) with the run's tokens so far, renew the lease, and read
    whether the agent is paused (or was made external) now; None, writing nothing, when the lease was lost. The run's row is updated first: its lock orders
    this write before or after another worker's claim, never across it. On PostgreSQL one
    statement (the turns are inserted only if the lease's update matched); elsewhere two, in a
    transaction.

    A record that is its own transaction (a model turn, a refused call, read-only calls: not a
    call's outcome, which commits with the call's effect) commits without waiting for the disk
    (`synchronous_commit` off for it, as the ledger's statements, docs/costs.md). Only a crash
    of the database server can lose such a record, and then nothing is lost that a resumed run
    does not redo: the next commit that waits for the disk (a call's effect with its outcome)
    makes every earlier one durable, so a lost refusal belonged to a call that had taken no
    effect, a lost read-only call is run again, and a lost model turn is asked of the model
    again."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        qn = connection.ops.quote_name
        run_table, turn_table = qn(Run._meta.db_table), qn(RunTurn._meta.db_table)
        # Inside a transaction (a call's outcome) the transaction keeps its own commit.
        own = not connection.in_atomic_block
        no_wait = (
            "no_wait AS (SELECT set_config('synchronous_commit', 'off', true))," if own else ""
        )
        from_no_wait = ", no_wait" if own else ""
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH {no_wait}
                lease AS (
                    UPDATE {run_table} SET prompt_tokens = %s, completion_tokens = %s,
                        heartbeat_at = %s
                    WHERE id = %s AND lease_token = %s RETURNING id),
                agent AS (SELECT is_paused, runtime FROM {qn(Agent._meta.db_table)}
                    WHERE id = %s)
                INSERT INTO {turn_table} (run_id, index, data)
                SELECT lease.id, (turn ->> 'index')::integer, turn
                FROM lease{from_no_wait}, jsonb_array_elements(%s::jsonb) AS turn
                ON CONFLICT (run_id, index) DO UPDATE SET data = EXCLUDED.data
                RETURNING (SELECT is_paused FROM agent), (SELECT runtime FROM agent)
                """,  # noqa: S608  (the table names are ours, every value is a parameter)
                # The turns as one JSON array: psycopg escapes each element of a jsonb[]
                # parameter with a regular expression (~0.14 ms a turn of client CPU).
                [prompt_tokens, completion_tokens, now, run.pk, token, run.agent_id,
                 json.dumps(turns, cls=DjangoJSONEncoder)],
            )  # fmt: skip
            rows = cursor.fetchall()
            return _recorded(*rows[0]) if rows else None
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, lease_token=token).update(
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, heartbeat_at=now
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


@transaction.atomic
def run_hand_back(*, run: Run, token: str) -> bool:
    """Its agent was paused while the run was under way: the run goes back to `queued`, its
    input and turns kept, to continue where it stopped when the agent is resumed (`run_resume`
    sends it; its claim holds it while the agent is paused). It keeps one start at most against
    RUNTIME_MAX_ATTEMPTS (it did not fail), and at least one, so that it reads its turns when
    it starts again. False when the lease was lost."""
    agent = _locked_agent(run.agent_id)
    handed = Run.objects.filter(pk=run.pk, lease_token=token).update(
        status=RunStatus.QUEUED, lease_token="",
        attempts=Greatest(F("attempts") - 1, Value(1)),
    )  # fmt: skip
    if handed and agent is not None and not agent.is_paused:
        _dispatch(run)  # resumed meanwhile: its run_resume found it running
    return bool(handed)


# The error a run shows while it waits for budget headroom (runner.WaitForHeadroom).
WAITING_FOR_HEADROOM = "Waiting for budget headroom"


@transaction.atomic
def run_wait_for_headroom(*, run: Run, token: str, reason: str) -> bool:
    """A model call of the run did not fit only because calls under way hold its budgets' money:
    the run goes back to `queued`, its input and turns kept, saying why it waits, and goes on
    where it stopped when its task sends it again (runtime/tasks.py, with a back-off). It keeps
    its starts as a handed-back run does. False when the lease was lost."""
    _locked_agent(run.agent_id)
    return bool(
        Run.objects.filter(pk=run.pk, lease_token=token).update(
            status=RunStatus.QUEUED,
            lease_token="",
            dispatched_at=timezone.now(),
            attempts=Greatest(F("attempts") - 1, Value(1)),
            error=f"{WAITING_FOR_HEADROOM}: {reason}"[:2000],
        )
    )


def sweep_runs() -> dict:
    """Send again the runs a worker lost: running with a heartbeat older than the lease (the
    worker died), or queued and not sent for as long (a message that never arrived). A second
    delivery of a live run backs off at its lease, so sending again is always safe. And send
    again the wake-ups that were lost (`_never_woken`)."""
    stale = timezone.now() - timedelta(seconds=settings.RUNTIME_LEASE_SECONDS)
    lost = list(
        Run.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=stale).values_list(
            "pk", "agent_id"
        )
    )
    unsent = [
        (run.pk, run.agent_id)
        for run in Run.objects.filter(
            status=RunStatus.QUEUED, dispatched_at__lt=stale, agent__is_paused=False
        ).select_related("agent")
        # One its claim held for the budget waits for room (wake_after_budget sends it then),
        # as a paused agent's waits for its resumption: not sent again every lease for a month.
        if blocking_budget(run.agent) is None
    ]
    for pk, agent_id in lost + unsent:
        with transaction.atomic():
            _dispatch(Run(pk=pk, agent_id=agent_id))
    lost, unsent = [pk for pk, _ in lost], [pk for pk, _ in unsent]
    if lost or unsent:
        log.info("runtime sweep sent again: %s running (stale), %s queued", lost, unsent)
    woken = []
    for agent_id, kind, task_id in _never_woken(stale):
        # Sent again as it was lost: the same trigger, for the same task.
        run_wake(agent=Agent(pk=agent_id), trigger=kind, task=Task(pk=task_id))
        if agent_id not in woken:
            woken.append(agent_id)
    if woken:
        log.warning("runtime sweep woke agents whose wake-up was lost: %s", woken)
    return {"resent": lost + unsent, "woken": woken}


def _never_woken(stale) -> list[tuple[int, str, int]]:
    """(agent, kind, task) of each wake-up that was lost: a managed agent, not paused, that an
    inbox item older than `stale`, received while it was managed, asked to act on a task it
    still holds (assigned, in progress or blocked: a lost `subtasks_done` leaves its parent in
    progress), with no trigger since; the latest such item's kind. A wake-up runs after its
    move's commit, so a worker that died in between, or a wake-up whose own transaction failed,
    left the task with no run. An item received while the agent was external never asked for a
    run (the switch to managed wakes it only for tasks it never started: run_resume). An
    agent's own act gives it no inbox item (it is never woken by it), and a task a run saw and
    left open (a question asked in a comment) has a trigger, and so has a wake-up a bound holds
    (`held`: only a human's release sends it). A comment by a managed agent is not sent again:
    the agent that wrote it is at work on the task, and replaying agents' conversations would
    let them talk past RUNTIME_MAX_AGENT_COMMENT_WAKES."""
    reached = RunTrigger.objects.filter(
        agent_id=OuterRef("agent_id"), task_id=OuterRef("task_id"),
        created_at__gte=OuterRef("created_at"),
    )  # fmt: skip
    items = (
        InboxItem.objects.filter(
            kind__in=WAKING_KINDS,
            created_at__lt=stale,
            agent__runtime=AgentRuntime.MANAGED,
            agent__is_paused=False,
            task__status__in=HELD_STATUSES,
            task__assignee_id=F("agent_id"),
        )  # fmt: skip
        .exclude(Exists(reached))
        .exclude(kind=COMMENT, event__actor_agent__runtime=AgentRuntime.MANAGED)
        .order_by("agent_id", "task_id", "-created_at")
        .values_list("agent_id", "kind", "task_id", "created_at")
    )
    latest = {}
    for agent_id, kind, task_id, created_at in items:
        latest.setdefault((agent_id, task_id), (kind, created_at))
    if not latest:
        return []  # the sweep's usual answer: no history read
    since = _managed_since({agent_id for agent_id, _ in latest})
    return [
        (agent_id, kind, task_id)
        for (agent_id, task_id), (kind, created_at) in latest.items()
        if agent_id in since and created_at >= since[agent_id]
    ]


# An agent whose history shows it managed throughout: every item it received asked for a run.
ALWAYS_MANAGED = datetime.min.replace(tzinfo=UTC)


def _managed_since(agent_ids: set[int]) -> dict[int, datetime]:
    """When each agent last became managed, by its history (organization/history.py: a row at
    every change of an agent): ALWAYS_MANAGED when no row shows it external. An agent whose
    last row shows it external (its switch to managed went unrecorded) is left out: nothing
    tells which of its items were received while it was managed. Two aggregates, whatever the
    length of the histories (a row per availability change too)."""
    history = Agent.history.filter(id__in=agent_ids)
    last_external = dict(
        history.exclude(runtime=AgentRuntime.MANAGED)
        .values("id")
        .annotate(at=Max("history_date"))
        .values_list("id", "at")
    )
    since = {agent_id: ALWAYS_MANAGED for agent_id in agent_ids if agent_id not in last_external}
    if last_external:
        after_external = Q()
        for agent_id, at in last_external.items():
            after_external |= Q(id=agent_id, history_date__gt=at)
        since.update(
            history.filter(after_external, runtime=AgentRuntime.MANAGED)
            .values("id")
            .annotate(at=Min("history_date"))
            .values_list("id", "at")
        )
    return since


def wake_after_budget(
    *, organization_id: int, team_id: int | None = None, agent_id: int | None = None
) -> int:
    """A budget of the organization released the agents it held back (raised, removed, a new
    month): wake those it covers (`team_id`, `agent_id`: only that team's or agent's) whose work
    waited for it — triggers that waited, a queued run its claim held (run_resume checks their
    budgets again). An agent with nothing waiting is not woken. Returns how many woke."""
    covered = Q(organization_id=organization_id)
    if team_id is not None:
        covered &= Q(agent__team_id=team_id)
    if agent_id is not None:
        covered &= Q(agent_id=agent_id)
    waiting = (
        RunTrigger.objects.filter(covered, run__isnull=True, held="")
        .values_list("agent_id", flat=True)
        .distinct()
    )
    held = Run.objects.filter(covered, status=RunStatus.QUEUED, agent__is_paused=False).values_list(
        "agent_id", flat=True
    )
    woke = 0
    for waiting_agent in sorted(set(waiting) | set(held)):
        woke += run_resume(agent_id=waiting_agent) is not None
    return woke
