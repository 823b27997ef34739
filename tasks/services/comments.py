"""Comments on a task, and the inbox that tells agents of them."""

from __future__ import annotations

from django.utils import timezone

from infrastructure.atomic import atomic
from organization.models import Agent

from .. import events
from ..models import InboxItem, Task, TaskComment
from ..rules import Actor
from .locks import locked


@atomic
def task_comment(*, task: Task, actor: Actor, body: str) -> TaskComment:
    """Comment on a task the caller may see; the others involved are told, never its author.

    The task is locked and read again, so the event's snapshot and recipients are current.
    """
    task = locked(task)
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
