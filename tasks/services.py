"""Writes of the tasks engine: the moves. Every change of assignee or status goes through one.

Each move runs in one transaction: it locks the task row first, then the agents' rows (in pk
order), checks the rules through `rules.check_assignment`, writes the task, records the move
through `events` (audit row, the receiving agent's inbox item and webhook delivery), and
refills the queue of an expert who dropped below capacity — all or nothing. The stale sweep
(`sweep.py`) escalates in bulk with the same rules, state changes and events.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Unpack

from django.db import connections, router, transaction
from django.db.models import Count, F, Func, Q, Subquery
from django.utils import timezone

from infrastructure.atomic import atomic
from infrastructure.errors import Conflict, Forbidden, Invalid, NotFound
from infrastructure.prepared import (
    ID_ARRAY,
    INT,
    INT2,
    INT3,
    TEXT,
    EqualsAny,
    PreparedQuery,
    PreparedQuerySet,
)
from organization.models import Agent, Organization, TeamRule
from organization.selectors import workloads_of
from organization.workload import workload_subquery_of

from . import events, rules
from .events import snapshot
from .models import (
    FINISHED_STATUSES,
    HELD_STATUSES,
    ActorKind,
    InboxItem,
    Task,
    TaskComment,
    TaskStatus,
    Urgency,
)
from .rules import NO_KEY, SYSTEM, Actor, DelegationDecision, Move
from .selectors import VisibleTask, estimated_wait_for_new, tasks_visible

# The status an assignee may move its task to (issue 3 §1).
TRANSITIONS = {
    TaskStatus.ASSIGNED: {TaskStatus.IN_PROGRESS},
    TaskStatus.IN_PROGRESS: {TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.FAILED},
    TaskStatus.BLOCKED: {TaskStatus.IN_PROGRESS, TaskStatus.FAILED},
}


# --- checks --------------------------------------------------------------------------------


def invalid_transition(current: str, wanted: str, why: str = "") -> Conflict:
    message = f"Cannot transition from {current} to {wanted}"
    return Conflict(f"{message}: {why}" if why else f"{message}.", "invalid_transition")


# What a move reads with its task: the agents it names, and the organization's team rule.
LOCKED_WITH = ("assignee", "queued_for", "queued_by", "created_by_agent", "organization__team_rule")


def _locked(task: Task | VisibleTask) -> Task:
    """The task's row, locked first of all a move's locks: the one read of the task in a move.

    A `VisibleTask` (REST) is read through the caller's view of the tasks, so this read is the
    visibility check too: 404 when the caller may not see it.
    """
    return _locked_with_parent(task, with_parent=False)[0]


def _task_rows(task_id: int, organization_id: int | None = None, agent_id: int | None = None,
               handle: str | None = None):  # fmt: skip
    """The task `task_id`; with an organization, as its agent `agent_id` (or a human) sees it
    (`selectors.tasks_visible`)."""
    if organization_id is None:
        return Task.objects.filter(pk=task_id).order_by()
    agent = Agent(pk=agent_id, handle=handle) if agent_id is not None else None
    return tasks_visible(organization_id, agent).filter(pk=task_id).order_by()


def _task_and_parent(rows) -> Q:
    """The condition "the task of `rows` (one at most) or its parent".

    On PostgreSQL `id = ANY((SELECT ARRAY[id, parent_id] …))`: the subquery runs once, before
    the pk index is read. The portable `IN (… UNION ALL …)` is pulled up into the join of the
    task's five related rows, and planning that took 8–13 ms a statement against ~2 (a prepared
    statement is planned up to ten times on each new connection: bench/runtime.py's moves);
    an OR of two IN subqueries would scan the whole table."""
    if connections[router.db_for_read(Task)].vendor != "postgresql":
        return Q(pk__in=rows.values("pk").union(rows.values("parent_id"), all=True))
    pair = Func(F("pk"), F("parent_id"), function="ARRAY", template="%(function)s[%(expressions)s]",
                output_field=ID_ARRAY)  # fmt: skip
    return Q(EqualsAny(F("pk"), Subquery(rows.values(pair=pair))))


def _lock_read(scope: str, with_parent: bool) -> PreparedQuerySet:
    """The read that locks a move's task (and its parent), compiled once: every move makes it,
    and building it (the visibility filter, a UNION, five joined rows) cost more CPU than the
    rest of an assignment. `scope`: any task, the organization's, or those an agent may see."""

    def build(**values):
        rows = _task_rows(**values)
        if with_parent:
            rows = Task.objects.filter(_task_and_parent(rows)).order_by("pk")
        return rows.select_for_update(of=("self",), **NO_KEY).select_related(*LOCKED_WITH)[:2]

    sentinels = {"task_id": INT}
    if scope != "any":
        sentinels["organization_id"] = INT2
    if scope == "agent":
        sentinels.update(agent_id=INT3, handle=TEXT)
    return PreparedQuerySet(Task, build, **sentinels)


_LOCK_READS = {
    (scope, with_parent): _lock_read(scope, with_parent)
    for scope in ("any", "organization", "agent")
    for with_parent in (False, True)
}


def _locked_with_parent(task: Task | VisibleTask, *, with_parent: bool = True):
    """(`_locked(task)`, its parent task locked by the same statement, or None).

    A move that finishes a subtask locks its parent too: the last open subtask to finish tells
    the parent's holder, exactly once even when two finish at the same time. Rows are locked in
    pk order, and a parent is older than its subtasks, so the parent is locked first — the order
    every move that locks a parent and its subtasks (cancelling with them, creating one) keeps.
    """
    if isinstance(task, VisibleTask):
        caller = task.caller
        values = {"task_id": task.task_id, "organization_id": caller.organization.pk}
        scope = "organization"
        if caller.agent is not None:
            values.update(agent_id=caller.agent.pk, handle=caller.agent.handle)
            scope = "agent"
    else:
        values, scope = {"task_id": task.pk}, "any"
    found = {t.pk: t for t in _LOCK_READS[scope, with_parent].instances(**values)}
    # Of two rows, the task is the one whose parent is the other.
    wanted = next((t for t in found.values() if t.parent_id in found), None)
    wanted = wanted or next(iter(found.values()), None)
    if wanted is None:
        if isinstance(task, VisibleTask):
            raise task.missing()
        raise NotFound(f"Task not found: {task.pk}", "task_not_found")
    return wanted, found.get(wanted.parent_id)


def _rule_of(task: Task) -> TeamRule:
    """The team rule read with the locked task (`_locked`); the defaults when none was set."""
    try:
        return task.organization.team_rule
    except TeamRule.DoesNotExist:
        return TeamRule(organization=task.organization)


def _lock_agents(task: Task, target: Agent | str) -> Agent:
    """Lock the target's and the current holder's rows (after the task's, in pk order).

    A handle is looked up in the task's organization by the same statement (404 if absent), so a
    move that names its target costs no read of its own. The agents are refreshed from their
    locked rows (`rules.lock_agents`): the rules and the holder's refill read them as locked.
    """
    if isinstance(target, Agent):
        rules.lock_agents([target, task.assignee])
        return target
    found = rules.lock_agent_named(org=task.organization, handle=target, holder=task.assignee)
    if found is None:
        raise NotFound(f"Agent not found: {target}", "agent_not_found")
    return found


def _ensure_open(task: Task, wanted: str) -> None:
    if task.status in FINISHED_STATUSES:
        raise invalid_transition(task.status, wanted, f"the task is {task.status}.")


def _ensure_may_move(task: Task, actor: Actor, wanted: str) -> None:
    """An agent moves only a task it holds, or an unheld one it created, or one queued for it
    or by it (while it waits in that queue: leaving it clears `queued_by`)."""
    if not actor.is_agent:
        return
    if task.assignee_id is not None:
        if task.assignee_id == actor.agent.pk:
            return
        raise invalid_transition(task.status, wanted, "only the task's assignee may move it.")
    if actor.agent.pk in (task.created_by_agent_id, task.queued_for_id, task.queued_by_id):
        return
    raise invalid_transition(task.status, wanted, "you neither hold nor created this task.")


def _pass_on(task: Task, actor: Actor) -> None:
    """An agent passing the task on is in its delegation chain from then on, last before whom
    it passes the task to: the holder is already; an agent that moves it without holding it
    (the expert it is queued for, who queued it, its creator) joins it here. So the chain names
    who passed it to its holder (the delegator, told of its result and comments), the agent
    still sees the task, and the task is never passed back to it (rule 4)."""
    if actor.is_agent:
        task.delegation_chain = rules.chain_after(list(task.delegation_chain), actor.agent.handle)


def _check_move(task: Task, actor: Actor, to: Agent, move: str) -> rules.Verdict:
    """Run the rules for `move`; the target's row is locked already (`_lock_agents`)."""
    return rules.check_assignment(
        org=task.organization, actor=actor, target=to, move=move, task=task,
        rule=_rule_of(task), locked=True,
    )  # fmt: skip


# --- state changes (in memory; the caller saves) --------------------------------------------


def _give(task: Task, target: Agent, now: datetime) -> None:
    task.status = TaskStatus.ASSIGNED
    task.assignee = target
    task.queued_for = None
    task.queued_by = None
    task.queued_at = None
    task.assigned_at = now
    task.delegation_chain = rules.chain_after(list(task.delegation_chain), target.handle)


def _wait_for(task: Task, target: Agent, by: Agent | None, now: datetime) -> None:
    task.status = TaskStatus.QUEUED
    task.assignee = None
    task.queued_for = target
    task.queued_by = by
    task.queued_at = now


def apply_escalation(
    task: Task,
    *,
    target: Agent | None,
    verdict: rules.Verdict | None,
    queued_by: Agent | None,
    now: datetime,
) -> None:
    """Seed 001's ESCALATE on the task, for the move and the stale sweep alike.

    No target (`rules.escalation_target`): the task waits for humans, in no agent's queue, so
    no one is its queuer any more (who queued it moves it no more: `_ensure_may_move`). A
    target with room (`verdict`) gets it; a full one has it queued for them, queued by
    `queued_by`.
    """
    if target is None:
        task.status = TaskStatus.ESCALATED
        task.assignee = None
        task.queued_for = None
        task.queued_by = None
        task.queued_at = None
    elif verdict.has_room:
        _give(task, target, now)
    else:
        _wait_for(task, target, queued_by, now)


# --- the queue ---------------------------------------------------------------------------------


def _next_queued(agent: Agent, workload: int | None) -> Task | None:
    """The agent's most urgent, oldest queued task (skipping rows another move holds), if it has
    room. Without a known `workload` the room is counted by the same statement (the agent's row
    is locked, so the count is current), and returned on the task as `workload_before`."""
    rows = (
        Task.objects.select_for_update(skip_locked=True, of=("self",), **NO_KEY)
        .select_related("organization__team_rule", "queued_for")
        .filter(queued_for=agent, status=TaskStatus.QUEUED)
        .order_by("-urgency_rank", "created_at", "pk")
    )
    if workload is None:
        rows = rows.annotate(workload_before=workload_subquery_of(agent)).filter(
            workload_before__lt=agent.workload_capacity
        )
    elif workload >= agent.workload_capacity:
        return None
    return next(iter(rows[:1]), None)


# How many tasks wait in an agent's queue: most moves that free room find it empty, and the
# full read (`_next_queued`: locked, with the rule and the room) costs ~8 ms of CPU to build.
_QUEUED_COUNT = PreparedQuery(
    Task,
    lambda agent_id: (
        Task.objects.filter(queued_for_id=agent_id, status=TaskStatus.QUEUED)
        .order_by()
        .values("queued_for_id")
        .annotate(n=Count("pk"))
        .values_list("n")
    ),
    agent_id=INT,
)


def fill_from_queue(agent: Agent, *, locked: bool = False) -> list[Task]:
    """Give `agent` its most urgent, oldest queued tasks while it has room (agent row locked;
    `locked` when the caller holds the lock already, having refreshed `agent` with it).

    Also run when an agent is resumed or given more capacity (organization's `agent_gained_room`
    signal, connected in apps.py).
    """
    if not locked:
        rules.lock_agents([agent])
    # Read from the locked row (`rules.lock_agents`): an agent paused meanwhile receives nothing.
    if agent.is_paused:
        return []
    # Read under the agent's lock, which queueing for it takes too: nothing queued now stays so.
    waiting = next(iter(_QUEUED_COUNT.rows(agent_id=agent.pk)), (0,))[0]
    if not waiting:
        return []
    workload = None
    given = []
    while (task := _next_queued(agent, workload)) is not None:
        if workload is None:
            workload = task.workload_before
        rules.check_assignment(
            org=task.organization, actor=SYSTEM, target=agent, move=Move.AUTO, task=task,
            rule=_rule_of(task), workload=workload,
        )  # fmt: skip
        before = snapshot(task)
        _give(task, agent, timezone.now())
        task.save_move()
        events.task_auto_assigned_event(task=task, before=before, to=agent)
        workload += 1
        given.append(task)
    if len(given) < waiting:
        if workload is None:
            workload = workloads_of([agent.pk])[agent.pk]
        if workload < agent.workload_capacity:
            # Room is left and tasks still wait: rows another move holds were skipped. That move
            # may leave its task queued here (it fails, or it only locked the task as a parent),
            # and nothing else would refill this agent until it frees another slot.
            transaction.on_commit(lambda: _refill_when_unlocked(agent), robust=True)
    return given


@atomic
def _refill_when_unlocked(agent: Agent) -> list[Task]:
    """`fill_from_queue` again, once the moves that held the agent's queued tasks are done.

    Run after the commit of the refill that skipped them, holding no lock: it waits for those
    rows first (task rows in pk order, before any agent's row: the order every move keeps, and
    nobody waits for a task's row while holding an agent's, the refill skipping locked ones), so
    it cannot deadlock. Locked, they are its own, and `fill_from_queue` skips none of them.
    """
    list(
        Task.objects.select_for_update(of=("self",), **NO_KEY)
        .filter(queued_for=agent, status=TaskStatus.QUEUED)
        .order_by("pk")
        .values_list("pk")
    )
    return fill_from_queue(agent)


def _refill_if_dropped(previous: Agent | None, task: Task, *, locked: bool = True) -> None:
    if previous is not None and task.assignee_id != previous.pk:
        fill_from_queue(previous, locked=locked)


# --- create and move -----------------------------------------------------------------------


@atomic
def task_create(
    *,
    org: Organization,
    actor: Actor,
    title: str,
    description: str = "",
    required_expertise: str = "",
    urgency: str = Urgency.NORMAL,
    deadline: datetime | None = None,
    assignee: Agent | None = None,
    parent: Task | VisibleTask | None = None,
) -> Task:
    """Create a task, assigned to `assignee` (rules checked) or queued unassigned; with `parent`,
    a subtask of it (`rules.check_parent`: an agent adds subtasks to a task it holds)."""
    now = timezone.now()
    if parent is not None:
        # Locked before the assignee (a task's row before agents', as every move), and kept
        # until commit: a parent being finished or cancelled meanwhile cannot miss this subtask.
        parent = _locked(parent)
        rules.check_parent(org=org, actor=actor, parent=parent)
    task = Task(
        organization=org,
        title=title,
        description=description,
        required_expertise=required_expertise,
        urgency=urgency,
        deadline=deadline,
        parent=parent,
        created_by_agent=actor.agent,
        created_by_user=actor.user if actor.kind == ActorKind.USER else None,
        delegation_chain=[actor.agent.handle] if actor.is_agent else [],
    )
    if assignee is not None:
        move = Move.CLAIM if actor.is_(assignee) else Move.CREATE
        rules.check_assignment(org=org, actor=actor, target=assignee, move=move, task=task)
        _give(task, assignee, now)
    else:
        task.status = TaskStatus.QUEUED
        task.queued_at = now
        task.queued_by = actor.agent
    task.save_new()
    events.task_created_event(task=task, actor=actor, assignee=assignee)
    return task


@atomic
def task_assign(*, task: Task | VisibleTask, actor: Actor, to: Agent | str | None = None) -> Task:
    """Assign to `to` (an agent, or its handle), or (no `to`) the calling agent claims the task."""
    task = _locked(task)
    previous = task.assignee
    claim = to is None
    if claim and actor.agent is None:
        raise Forbidden("agent_id is required: only an agent can claim a task.", "agent_required")
    to = _lock_agents(task, actor.agent if claim else to)
    claim = claim or actor.is_(to)
    _ensure_open(task, TaskStatus.ASSIGNED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    if claim and actor.is_agent:
        # A task queued for another expert is taken from that queue only by whoever may move
        # it anyway (its creator, or who queued it: `_ensure_may_move`), never by a delegator.
        queued_elsewhere = task.queued_for_id not in (None, to.pk) and to.pk not in (
            task.created_by_agent_id,
            task.queued_by_id,
        )
        if task.assignee_id is not None or queued_elsewhere:
            raise invalid_transition(
                task.status,
                TaskStatus.ASSIGNED,
                "only an unassigned task, one queued for you, or one you created or queued "
                "can be claimed.",
            )
    else:
        _ensure_may_move(task, actor, TaskStatus.ASSIGNED)
        _pass_on(task, actor)
    _check_move(task, actor, to, Move.CLAIM if claim else Move.ASSIGN)
    before = snapshot(task)
    _give(task, to, timezone.now())
    task.save_move()
    record = events.task_claimed_event if claim else events.task_assigned_event
    record(task=task, actor=actor, before=before, to=to)
    _refill_if_dropped(previous, task)
    return task


@atomic
def task_delegate(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's DELEGATE: an agent passes the task on (to an agent, or its handle), storing
    the DELEGATION DECISION."""
    task = _locked(task)
    previous = task.assignee
    to = _lock_agents(task, to)
    # After the reads, so that an unknown task or agent answers 404 first, as it always has.
    if not actor.is_agent:
        raise Forbidden(
            "Only an agent delegates (it acts as one agent); a human reassigns with assign.",
            "agent_required",
        )
    _ensure_open(task, TaskStatus.ASSIGNED)
    _ensure_may_move(task, actor, TaskStatus.ASSIGNED)
    _pass_on(task, actor)
    _check_move(task, actor, to, Move.DELEGATE)
    before = snapshot(task)
    _give(task, to, timezone.now())
    task.save_move()
    events.task_delegated_event(task=task, actor=actor, before=before, to=to, **decision)
    _refill_if_dropped(previous, task)
    return task


@atomic
def task_queue(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    to: Agent | str,
    wait_time_seconds: int | None = None,
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's QUEUE: the task waits for a busy (full, not offline) expert (an agent, or its
    handle).

    The DELEGATION DECISION is stored; `wait_time_seconds` is the caller's Wait Time, else ours.
    """
    task = _locked(task)
    previous = task.assignee
    to = _lock_agents(task, to)
    _ensure_open(task, TaskStatus.QUEUED)
    if task.status == TaskStatus.QUEUED and task.queued_for_id == to.pk:
        raise Conflict(f"The task is already queued for {to.handle}.", "already_queued")
    _ensure_may_move(task, actor, TaskStatus.QUEUED)
    if task.assignee_id == to.pk:
        raise Conflict(f"The task is already assigned to {to.handle}.", "already_assigned")
    _pass_on(task, actor)
    _check_move(task, actor, to, Move.QUEUE)
    wait = estimated_wait_for_new(agent=to, urgency_rank=task.urgency_rank)
    before = snapshot(task)
    _wait_for(task, to, actor.agent or task.queued_by, timezone.now())
    task.save_move()
    events.task_queued_event(
        task=task, actor=actor, before=before, to=to, estimated_wait=wait,
        wait_time_seconds=wait if wait_time_seconds is None else wait_time_seconds, **decision,
    )  # fmt: skip
    _refill_if_dropped(previous, task)
    return task


@atomic
def task_escalate(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    reason: str = "",
    **decision: Unpack[DelegationDecision],
) -> Task:
    """Seed 001's ESCALATE: to the senior, else the default supervisor, else humans.

    The DELEGATION DECISION is stored; `reason` is the reasoning when `reasoning` is not given.
    """
    task = _locked(task)
    _ensure_open(task, TaskStatus.ESCALATED)
    if task.status == TaskStatus.ESCALATED:
        raise invalid_transition(task.status, TaskStatus.ESCALATED, "it already waits for humans.")
    _ensure_may_move(task, actor, TaskStatus.ESCALATED)
    _pass_on(task, actor)
    source = actor.agent if actor.is_agent else rules.escalation_source(task)
    rule, previous, target, verdict = _rule_of(task), task.assignee, None, None
    up = {"rule": rule, "source": source, "queued_for_id": task.queued_for_id,
          "by_roles": rules.roles_apply(actor, task)}  # fmt: skip
    candidates = rules.escalation_candidates(**up)
    if candidates:
        # All of them locked with the holder, in one statement, before one is chosen: whether
        # each is offline is read under its lock (a senior paused meanwhile is passed over).
        rules.lock_agents([*candidates, previous])
        target = rules.escalation_target(**up)
    if target is not None:
        verdict = _check_move(task, actor, target, Move.ESCALATE)
    before = snapshot(task)
    apply_escalation(task, target=target, verdict=verdict, queued_by=source, now=timezone.now())
    task.save_move()
    events.task_escalated_event(
        task=task, actor=actor, before=before, target=target, verdict=verdict,
        **{**decision, "reasoning": decision.get("reasoning") or reason},
    )  # fmt: skip
    # With no candidate to lock, the holder's row was not locked yet: fill_from_queue locks it.
    _refill_if_dropped(previous, task, locked=bool(candidates))
    return task


def agent_work_escalate(*, agent: Agent, actor: Actor, reason: str) -> list[Task]:
    """Escalate every task `agent` is queued for or holds (rule 6), each by `task_escalate`
    with its event: run before the agent is deleted, so none is left held by no one.

    Its queue first: escalating a held task frees room that its queue would otherwise refill.
    """
    queued = Task.objects.filter(queued_for=agent, status=TaskStatus.QUEUED)
    held = Task.objects.filter(assignee=agent, status__in=HELD_STATUSES)
    ids = [pk for rows in (queued, held) for pk in rows.order_by("pk").values_list("pk", flat=True)]
    return [task_escalate(task=Task(pk=pk), actor=actor, reason=reason) for pk in ids]


# Every foreign key from a task to an agent: an agent's deletion clears them all.
AGENT_POINTERS = [f.name for f in Task._meta.concrete_fields if f.related_model is Agent]


def escalate_work_of_leaving_agent(*, agent: Agent, caller, **kwargs) -> list[Task]:
    """`organization.services.agent_leaving`'s receiver (tasks/apps.py connects it).

    Then the tasks whose pointer to the agent its deletion clears are locked, by pk, before the
    deletion locks the agent: a move locks its task before any agent, and one holding a task the
    agent created while it tells the agent (an inbox item's key share on the agent's row) would
    otherwise deadlock with the deletion's update of that task."""
    moved = agent_work_escalate(
        agent=agent, actor=Actor.of(caller), reason=f"{agent.handle} was deleted."
    )
    pointing = Q()
    for name in AGENT_POINTERS:  # holder, expert waited for, who queued it, creator …
        pointing |= Q(**{name: agent})
    locked = Task.objects.filter(pointing).order_by("pk").select_for_update(of=("self",))
    list(locked.values_list("pk", flat=True))
    return moved


def _change_status(
    task: Task, status: str, *, holder_locked: bool = False
) -> tuple[dict, Agent | None]:
    """Move the (locked, checked) task to `status`; (its snapshot before, the holder it freed).

    The holder's row is locked only when the move frees it: its workload changes (and its queue
    may refill); a move between held statuses changes no count that a lock must order."""
    holder = task.assignee if task.status in HELD_STATUSES else None
    if holder is not None and not holder_locked and status in FINISHED_STATUSES:
        rules.lock_agents([holder])
    before = snapshot(task)
    task.status = status
    if status in FINISHED_STATUSES:
        task.finished_at = timezone.now()
        task.queued_for = None
    task.save_move()
    return before, holder if status in FINISHED_STATUSES else None


def _tell_parent(task: Task, parent: Task | None, actor: Actor) -> None:
    """`task` (a subtask of the locked `parent`) just finished: if it was the parent's last open
    subtask, the parent's holder is told (`subtasks_done`). The parent's row lock makes this
    exactly once: of two subtasks finishing together, the second to get the lock sees the first
    finished. Nobody is told about a parent that is finished itself."""
    if parent is None or parent.status in FINISHED_STATUSES:
        return
    counts = Counter(
        dict(
            Task.objects.filter(parent=parent)
            .order_by()
            .values_list("status")
            .annotate(n=Count("pk"))
        )
    )
    if any(status not in FINISHED_STATUSES for status in counts):
        return
    events.subtasks_done_event(parent=parent, actor=actor, last=task, counts=counts)


# What a finished task may carry: a result in words, and its data (issue 11 §1).
RESULT_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED)


@atomic
def task_set_status(
    *,
    task: Task | VisibleTask,
    actor: Actor,
    status: str,
    note: str = "",
    result: str = "",
    result_data: dict | None = None,
) -> Task:
    """The assignee moves its task: assigned → in_progress → blocked ⇄ in_progress → completed | failed.

    Completing or failing stores the `result` and `result_data` (any other move refuses them)
    and tells the task's creator and whoever delegated it; a subtask's parent is told when its
    last open subtask finishes.
    """
    finishing = status in FINISHED_STATUSES
    task, parent = _locked_with_parent(task, with_parent=finishing)
    if actor.is_agent and task.assignee_id != actor.agent.pk:
        raise invalid_transition(
            task.status, status, "only the task's assignee may change its status."
        )
    if status not in TRANSITIONS.get(task.status, set()):
        raise invalid_transition(task.status, status)
    if status in RESULT_STATUSES:
        task.result, task.result_data = result, result_data
    elif result or result_data is not None:
        raise Invalid(
            f"result and result_data come with completed or failed, not with {status}.", "invalid"
        )
    before, freed = _change_status(task, status)
    events.task_status_changed_event(task=task, actor=actor, before=before, note=note)
    if finishing:
        _tell_parent(task, parent, actor)
    if freed is not None:
        fill_from_queue(freed, locked=True)
    return task


def _open_subtasks(task: Task, *, known: set[int] = frozenset()) -> list[int]:
    """The ids of the task's open subtasks at any depth (one query per level), but `known`.

    Finished subtasks are walked through: a completed subtask may still have open ones.
    """
    found, seen, level = [], {task.pk}, [task.pk]
    while level:
        rows = Task.objects.filter(parent_id__in=level).order_by().values_list("pk", "status")
        level = []
        for pk, status in rows:
            if pk in seen:  # a parent is set once at creation: only damaged data loops
                continue
            seen.add(pk)
            level.append(pk)
            if status not in FINISHED_STATUSES and pk not in known:
                found.append(pk)
    return found


def _lock_open_subtasks(task: Task) -> list[Task]:
    """Lock the task's open subtasks (at any depth, in pk order after the task's own lock).

    Looked for again once locked: a subtask created meanwhile under one of them is locked too
    (creating one locks its parent, which is then locked here, so the search ends).
    """
    locked: dict[int, Task] = {}
    while ids := _open_subtasks(task, known=set(locked)):
        rows = (
            Task.objects.filter(pk__in=ids)
            .select_for_update(of=("self",), **NO_KEY)
            .select_related(*LOCKED_WITH)
            .order_by("pk")
        )
        locked.update((t.pk, t) for t in rows)
    return [t for _, t in sorted(locked.items()) if t.status not in FINISHED_STATUSES]


@atomic
def task_cancel(
    *, task: Task | VisibleTask, actor: Actor, reason: str = "", cancel_subtasks: bool = False
) -> Task:
    """Cancel: a human, or the agent that created the task.

    A task with open subtasks (at any depth) is cancelled only with `cancel_subtasks`, and then
    they are cancelled with it, each with its own event; without it → 409 `open_subtasks`.
    """
    task, parent = _locked_with_parent(task)
    _ensure_open(task, TaskStatus.CANCELLED)
    if actor.is_agent and task.created_by_agent_id != actor.agent.pk:
        raise invalid_transition(
            task.status, TaskStatus.CANCELLED, "only the task's creator or a human may cancel it."
        )
    subtasks = []
    if cancel_subtasks:
        subtasks = _lock_open_subtasks(task)
    elif count := len(_open_subtasks(task)):
        raise Conflict(
            f"The task has {count} open subtask(s): cancel them first, or cancel it with "
            "cancel_subtasks: true to cancel them with it.",
            "open_subtasks",
        )
    # Every holder freed, locked at once in pk order (as every move locks agents).
    everything = [task, *subtasks]
    rules.lock_agents(t.assignee for t in everything if t.status in HELD_STATUSES)
    freed = []
    for one in everything:
        waited_for = one.queued_for
        before, holder = _change_status(one, TaskStatus.CANCELLED, holder_locked=True)
        events.task_cancelled_event(
            task=one, actor=actor, before=before, reason=reason,
            with_parent=None if one is task else task, waited_for=waited_for,
        )  # fmt: skip
        if holder is not None and holder not in freed:
            freed.append(holder)
    # The subtasks' parents are cancelled with them (or were finished): only the task's own
    # parent may have seen its last open subtask finish.
    _tell_parent(task, parent, actor)
    for holder in freed:
        fill_from_queue(holder, locked=True)
    return task


@atomic
def task_comment(*, task: Task, actor: Actor, body: str) -> TaskComment:
    """Comment on a task the caller may see (`task` read through the caller's view): the others
    involved — holder, creator, whoever delegated it — are told, never its author.

    The task is locked and read again, as by a move: a move that landed since the caller read it
    must not leave the comment's event with a stale snapshot (the audit replay) or tell the
    former holder."""
    task = _locked(task)
    comment = TaskComment.objects.create(
        organization_id=task.organization_id,
        task=task,
        author=actor.agent,
        author_label=actor.label,
        body=body,
    )
    events.task_commented_event(task=task, actor=actor, comment=comment)
    return comment


def inbox_mark_read(*, agent: Agent, item_ids: list[int] | None = None) -> int:
    """Mark the agent's inbox items read (all unread ones when `item_ids` is None)."""
    items = InboxItem.objects.filter(agent=agent, read_at__isnull=True)
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    return items.update(read_at=timezone.now())
