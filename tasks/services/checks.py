"""What a move checks before it writes: the task is open, the actor may move it, the rules pass."""

from __future__ import annotations

from infrastructure.errors import Conflict

from .. import rules
from ..models import FINISHED_STATUSES, Task, TaskStatus
from ..rules import Actor
from .locks import rule_of

# The status an assignee may move its task to (issue 3 §1).
TRANSITIONS = {
    TaskStatus.ASSIGNED: {TaskStatus.IN_PROGRESS},
    TaskStatus.IN_PROGRESS: {TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.FAILED},
    TaskStatus.BLOCKED: {TaskStatus.IN_PROGRESS, TaskStatus.FAILED},
}

# What a finished task may carry: a result in words, and its data (issue 11 §1).
RESULT_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED)


def invalid_transition(current: str, wanted: str, why: str = "") -> Conflict:
    message = f"Cannot transition from {current} to {wanted}"
    return Conflict(f"{message}: {why}" if why else f"{message}.", "invalid_transition")


def ensure_open(task: Task, wanted: str) -> None:
    if task.status in FINISHED_STATUSES:
        raise invalid_transition(task.status, wanted, f"the task is {task.status}.")


def ensure_may_move(task: Task, actor: Actor, wanted: str) -> None:
    """An agent moves only a task it holds, an unheld one it created, or one queued for or by it."""
    if not actor.is_agent:
        return
    if task.assignee_id is not None:
        if task.assignee_id == actor.agent.pk:
            return
        raise invalid_transition(task.status, wanted, "only the task's assignee may move it.")
    if actor.agent.pk in (task.created_by_agent_id, task.queued_for_id, task.queued_by_id):
        return
    raise invalid_transition(task.status, wanted, "you neither hold nor created this task.")


def pass_on(task: Task, actor: Actor) -> None:
    """An agent passing the task on joins its delegation chain, last before the next holder.

    So the chain names who passed it on, the agent still sees it, and it never comes back (rule 4).
    """
    if actor.is_agent:
        task.delegation_chain = rules.chain_after(list(task.delegation_chain), actor.agent.handle)


def check_move(task: Task, actor: Actor, to, move: str) -> rules.Verdict:
    """Run the rules for `move`; the target's row is locked already (`locks.lock_target`)."""
    return rules.check_assignment(
        org=task.organization,
        actor=actor,
        target=to,
        move=move,
        task=task,
        rule=rule_of(task),
        locked=True,
    )
