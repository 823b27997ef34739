"""A run's end: settle the tasks it was woken for, ask for its follow-ups, and finish it.

Answered, the tasks it did nothing with are completed with the answer; else they are blocked."""

from __future__ import annotations

import logging

from django.db.models import Q
from django.utils import timezone

from collaboration.providers.turns import Turn
from collaboration.toolloop import LoopStop, ToolLoopResult
from infrastructure.atomic import undone_whole
from infrastructure.errors import DomainError
from infrastructure.prepared import update_where
from organization.caller import caller_for_agent
from tasks import services as task_services
from tasks.models import EventKind, Task, TaskEvent, TaskStatus
from tasks.rules import Actor
from tasks.selectors import subtasks_of

from . import services, sql
from .acts import acted_on, answered_task_ids, finished_a_subtask, tasks_it_took_on
from .models import SETTLEABLE, Run, RunStatus
from .stops import LeaseLost

log = logging.getLogger(__name__)

# Why a task the run would have completed with the model's final answer is blocked instead.
NO_ANSWER = (
    "The model stopped with no final answer (no text and no tool call): nothing to complete "
    "the task with."
)


def _held_tasks(run: Run) -> list[Task]:
    """The run's tasks the agent held when its model was shown them and still holds, assigned or in
    progress (not one that reached it meanwhile); without a stored input, its triggers' tasks."""
    if run.context:
        ids = [t["id"] for t in run.context.get("tasks", []) if t.get("you_hold_it")]
    else:
        ids = [i for i in run.triggers.values_list("task_id", flat=True) if i is not None]
    return sql.settleable_tasks(ids, run.agent_id)


def _open_subtasks(task: Task) -> int:
    subtasks = subtasks_of(task)
    return subtasks.total - subtasks.done


def _move(task: Task, actor: Actor, status: str, **kwargs) -> Task:
    """assigned → in_progress first when needed, then `status` (each a move of the agent)."""
    if task.status == TaskStatus.ASSIGNED:
        task = task_services.task_set_status(task=task, actor=actor, status=TaskStatus.IN_PROGRESS)
    return task_services.task_set_status(task=task, actor=actor, status=status, **kwargs)


def _settled_before(run: Run, turns: list[Turn]) -> list[dict]:
    """What an earlier start's end already did (its worker died before finishing the run): each
    task it completed or blocked, read from the audit trail by the run's note (none on a first)."""
    if run.attempts < 2:
        return []
    ids = {t["id"] for t in run.context.get("tasks", [])} | answered_task_ids(turns)
    by_run = Q(notes__startswith=f"Managed run #{run.pk}:") | Q(
        notes__startswith=f"Managed run #{run.pk} stopped:"
    )
    rows = (
        TaskEvent.objects.filter(by_run, task_id__in=ids, actor_agent_id=run.agent_id)
        .filter(after__status__in=[TaskStatus.COMPLETED, TaskStatus.BLOCKED])
        .order_by("pk")
        .values_list("task_id", "after__status")
    )
    return [{"task": task_id, "action": status} for task_id, status in rows]


def settle(run: Run, token: str, result: ToolLoopResult) -> None:
    actor = Actor.of(caller_for_agent(run.agent))
    # A resumed run: what its end had done before its worker died.
    outcome = _settled_before(run, result.turns)
    if result.stop_reason == LoopStop.ANSWERED:
        acted = acted_on(result.turns)
        answer = (result.text or "").strip()
        # No text is no answer (empty content, or a reply cut at max_tokens before its text):
        # a task it would complete is blocked with the reason, not completed with no result.
        unanswered = False
        # A subtask its answer completes: its parent's subtasks_done is the agent's own act.
        settled_a_subtask = False
        for task in _held_tasks(run):
            if task.pk in acted:
                outcome.append({"task": task.pk, "action": "none", "why": "the run acted on it"})
            elif _open_subtasks(task):
                outcome.append({"task": task.pk, "action": "none", "why": "open subtasks"})
            elif not answer:
                unanswered = True
                note = f"Managed run #{run.pk} stopped: {NO_ANSWER}"
                _settle_task(run, token, outcome, task, actor, TaskStatus.BLOCKED, note=note)
            else:
                note = f"Managed run #{run.pk}: its final answer is the result."
                answered = {"result": answer[:20_000], "note": note}
                _settle_task(run, token, outcome, task, actor, TaskStatus.COMPLETED, **answered)
                settled_a_subtask |= task.parent_id is not None
        if settled_a_subtask or finished_a_subtask(result.turns):
            _follow_up_parents_it_finished(run)
        _follow_up_what_it_took_on(run, token, outcome, actor, result.turns)
        if unanswered:
            services.run_finish(
                run=run, token=token, status=RunStatus.FAILED, error=NO_ANSWER, outcome=outcome
            )
        else:
            services.run_finish(run=run, token=token, status=RunStatus.COMPLETED, outcome=outcome)
        return
    if result.stop_reason == LoopStop.WAITING:
        _settle_waiting(run, token, outcome, actor, result.turns)
        return
    if result.stop_reason == LoopStop.MAX_TURNS:
        error = (
            f"No final answer after {run.max_turns} model turns (max_turns): the tool calls of "
            "its last turn were not run."
        )
    else:
        error = f"The provider failed: {result.error}"
    settle_failed(run, token, error, actor=actor, turns=result.turns, outcome=outcome)


# Why a task of a run that stopped to wait for a human is blocked: it was not worked.
NOT_WORKED_WHILE_WAITING = (
    "not worked: the run stopped when the agent asked a human about another task, and waits "
    "for the answer. Assign it again, or comment on it, to have it worked."
)


def _settle_waiting(run: Run, token: str, outcome: list, actor: Actor, turns: list[Turn]) -> None:
    """The model asked a human (a tool that ends the turn): the run ends there. What it asked
    about stays with the agent, which the answer wakes; another task it held and did nothing
    with is blocked (nothing would wake the agent for it)."""
    acted = acted_on(turns)
    for task in _held_tasks(run):
        if task.pk in acted:
            outcome.append({"task": task.pk, "action": "none", "why": "waits for a human"})
        else:
            note = f"Managed run #{run.pk} stopped: {NOT_WORKED_WHILE_WAITING}"
            _settle_task(run, token, outcome, task, actor, TaskStatus.BLOCKED, note=note)
    if finished_a_subtask(turns):
        _follow_up_parents_it_finished(run)
    _follow_up_what_it_took_on(run, token, outcome, actor, turns)
    services.run_finish(run=run, token=token, status=RunStatus.COMPLETED, outcome=outcome)


def settle_failed(
    run: Run,
    token: str,
    error: str,
    actor: Actor | None = None,
    turns: list[Turn] | None = None,
    outcome: list | None = None,
) -> None:
    """Block the tasks the agent still holds (assigned or in progress) with the reason, and fail
    the run: "Needs attention" lists them, and nothing is lost (what its calls gave the agent
    itself, `turns`, gets a follow-up run). `outcome`: what an earlier start's end did."""
    actor = actor or Actor.of(caller_for_agent(run.agent))
    outcome = list(outcome or [])
    note = f"Managed run #{run.pk} stopped: {error}"[:2000]
    try:
        tasks = _held_tasks(run)
    except Exception:
        log.exception("run %s: could not read its tasks", run.pk)
        tasks = []
    for task in tasks:
        _settle_task(run, token, outcome, task, actor, TaskStatus.BLOCKED, note=note)
    _follow_up_parents_it_finished(run)
    if turns:
        _follow_up_what_it_took_on(run, token, outcome, actor, turns)
    services.run_finish(run=run, token=token, status=RunStatus.FAILED, error=error, outcome=outcome)


def _follow_up_parents_it_finished(run: Run) -> None:
    """A parent the agent holds, open, whose last open subtask this run finished: its holder is
    not woken by `subtasks_done` for its own act, and this run did not settle it (it acted on it,
    or never saw it), so the agent asks for a follow-up run about it — or it waited for ever."""
    if run.started_at is None:
        return
    parents = Task.objects.filter(
        assignee_id=run.agent_id,
        status__in=SETTLEABLE,
        events__kind=EventKind.SUBTASKS_DONE,
        events__actor_agent_id=run.agent_id,
        events__created_at__gte=run.started_at,
    ).distinct()
    for parent in parents:
        services.run_wake(agent=run.agent, trigger=EventKind.SUBTASKS_DONE, task=parent)


# The triggers a run's end gives its own agent (its own act wakes it for nothing otherwise).
OWN_FOLLOW_UPS = (EventKind.ASSIGNED, EventKind.SUBTASKS_DONE)

# Why a task a run gave its own agent gets no follow-up run (`_follow_up_what_it_took_on`).
NOT_WORKED = (
    "not worked: the agent gave it to itself in a run that only its own work had woken, and "
    "such a run asks for no follow-up (an agent that gives itself a task in every run would "
    "wake itself for ever). A comment on it, or assigning it, has it worked."
)


def _woken_only_by_its_own_work(run: Run) -> bool:
    """Every trigger of the run is a follow-up an earlier run of the same agent gave it for its
    own work (`OWN_FOLLOW_UPS`, woken by that run): nobody else asked for this run."""
    triggers = run.triggers.values_list("trigger", "woken_by__agent_id")
    return bool(triggers) and all(
        kind in OWN_FOLLOW_UPS and by == run.agent_id for kind, by in triggers
    )


def _follow_up_what_it_took_on(
    run: Run, token: str, outcome: list, actor: Actor, turns: list[Turn]
) -> None:
    """Ask for a follow-up run about each task a writing call left with the run's own agent (one it
    created or claimed) that no trigger reached: nothing wakes an agent for its own act. Once per
    chain: a run only such follow-ups woke blocks them instead (docs/runtime.md)."""
    held = {t["id"] for t in run.context.get("tasks", []) if t.get("you_hold_it")}
    ids = tasks_it_took_on(turns, run.agent.handle) - held
    if not ids:
        return
    taken = (
        Task.objects.filter(pk__in=ids, assignee_id=run.agent_id, status__in=SETTLEABLE)
        .filter(services.unseen_since_assigned("assignee_id"))
        .order_by("pk")
    )
    if not _woken_only_by_its_own_work(run):
        for task in taken:
            services.run_wake(agent=run.agent, trigger=EventKind.ASSIGNED, task=task)
        return
    note = f"Managed run #{run.pk}: {NOT_WORKED}"
    for task in taken:
        _settle_task(run, token, outcome, task, actor, TaskStatus.BLOCKED, note=note)


def _settle_task(
    run: Run, token: str, outcome: list, task: Task, actor: Actor, status: str, **kwargs
) -> None:
    """Move the task to `status` as the agent (`_move`) under the run's lease (`_safely`)."""
    _safely(run, token, outcome, task, lambda: _move(task, actor, status, **kwargs), str(status))


def _safely(run: Run, token: str, outcome: list, task: Task, move, action: str) -> None:
    """Make the move in its own transaction while the run holds its lease (LeaseLost otherwise);
    a refusal is noted in the outcome, not raised. The run's row is locked last, after the move's
    rows, so another worker's claim waits for the commit or undoes the move."""
    try:
        with undone_whole():
            move()
            if not update_where(
                Run, {"pk": run.pk, "lease_token": token}, heartbeat_at=timezone.now()
            ):
                raise LeaseLost
    except DomainError as exc:
        outcome.append({"task": task.pk, "action": "none", "why": f"{exc.code}: {exc.message}"})
    else:
        outcome.append({"task": task.pk, "action": action})
