"""What happens to an agent's work when it leaves: every task it holds or waits for escalates."""

from __future__ import annotations

from django.db.models import Q

from organization.models import Agent

from ..models import HELD_STATUSES, Task, TaskStatus
from ..rules import Actor
from .moves import task_escalate

# Every foreign key from a task to an agent: an agent's deletion clears them all.
AGENT_POINTERS = [f.name for f in Task._meta.concrete_fields if f.related_model is Agent]


def agent_work_escalate(*, agent: Agent, actor: Actor, reason: str) -> list[Task]:
    """Escalate every task `agent` is queued for or holds (rule 6), each by `task_escalate`.

    Its queue first: escalating a held task frees room that its queue would otherwise refill.
    """
    queued = Task.objects.filter(queued_for=agent, status=TaskStatus.QUEUED)
    held = Task.objects.filter(assignee=agent, status__in=HELD_STATUSES)
    ids = [pk for rows in (queued, held) for pk in rows.order_by("pk").values_list("pk", flat=True)]
    return [task_escalate(task=Task(pk=pk), actor=actor, reason=reason) for pk in ids]


def escalate_work_of_leaving_agent(*, agent: Agent, caller, **kwargs) -> list[Task]:
    """`organization.services.agent_leaving`'s receiver (tasks/apps.py connects it).

    Then it locks, by pk, the tasks whose pointer to the agent the deletion clears: a move locks
    its task before any agent, so the deletion must too, or it deadlocks with one.
    """
    moved = agent_work_escalate(
        agent=agent, actor=Actor.of(caller), reason=f"{agent.handle} was deleted."
    )
    pointing = Q()
    for name in AGENT_POINTERS:  # holder, expert waited for, who queued it, creator …
        pointing |= Q(**{name: agent})
    locked = Task.objects.filter(pointing).order_by("pk").select_for_update(of=("self",))
    list(locked.values_list("pk", flat=True))
    return moved
