"""The locks a move takes: its task (and parent) first, then the agents it touches, in pk order."""

from __future__ import annotations

from infrastructure.errors import NotFound
from organization.models import Agent, TeamRule

from .. import rules, sql
from ..models import Task
from ..selectors import VisibleTask


def locked(task: Task | VisibleTask) -> Task:
    """The task's row, locked first of a move's locks; for a `VisibleTask`, 404 if not visible."""
    return locked_with_parent(task, with_parent=False)[0]


def locked_with_parent(
    task: Task | VisibleTask, *, with_parent: bool = True
) -> tuple[Task, Task | None]:
    """(`locked(task)`, its parent locked by the same statement, or None).

    Rows lock in pk order and a parent is older than its subtasks, so the parent locks first.
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
    found = {t.pk: t for t in sql.lock_task_rows(scope, with_parent=with_parent, **values)}
    # Of two rows, the task is the one whose parent is the other.
    wanted = next((t for t in found.values() if t.parent_id in found), None)
    wanted = wanted or next(iter(found.values()), None)
    if wanted is None:
        if isinstance(task, VisibleTask):
            raise task.missing()
        raise NotFound(f"Task not found: {task.pk}", "task_not_found")
    return wanted, found.get(wanted.parent_id)


def rule_of(task: Task) -> TeamRule:
    """The team rule read with the locked task; the defaults when none was set."""
    try:
        return task.organization.team_rule
    except TeamRule.DoesNotExist:
        return TeamRule(organization=task.organization)


def lock_target(task: Task, target: Agent | str) -> Agent:
    """Lock the target's and the current holder's rows (after the task's, in pk order).

    A handle is looked up in the task's organization by the locking statement (404 if absent).
    """
    if isinstance(target, Agent):
        rules.lock_agents([target, task.assignee])
        return target
    found = rules.lock_agent_named(org=task.organization, handle=target, holder=task.assignee)
    if found is None:
        raise NotFound(f"Agent not found: {target}", "agent_not_found")
    return found
