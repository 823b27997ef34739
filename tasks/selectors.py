"""Reads of the tasks engine, scoped to the caller: an agent sees only its own tasks."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from infrastructure.errors import NotFound
from infrastructure.inputs import parse_id
from organization.caller import Caller
from organization.models import Agent

from .models import (
    MAX_WAIT_SECONDS,
    ApprovalPolicy,
    HumanDecision,
    InboxItem,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
)
from .sql import subtask_rows, visible_task_rows
from .visibility import tasks_visible

# How many of an expert's latest completions the wait estimate averages.
COMPLETION_SAMPLE = 20


def tasks_visible_to(caller: Caller) -> QuerySet[Task]:
    return tasks_visible(caller.organization.pk, caller.agent).select_related(
        "assignee", "queued_for", "created_by_agent"
    )


@dataclass(frozen=True)
class VisibleTask:
    """A task the caller names by id, not read yet: a move reads it once, under its row lock.

    Read through the caller's view of the tasks (`rows`); `missing()` answers as `task_for` would.
    """

    caller: Caller
    task_id: int
    named: str

    @property
    def rows(self) -> QuerySet[Task]:
        return tasks_visible_to(self.caller).filter(pk=self.task_id).order_by()

    def missing(self) -> NotFound:
        return NotFound(f"Task not found: {self.named}", "task_not_found")


def visible_task(caller: Caller, pk) -> VisibleTask:
    """The task `pk` as the caller sees it, unread; an id that is no database id is 404 at once."""
    task_id = parse_id(pk)
    ref = VisibleTask(caller, task_id, str(pk))
    if not task_id:
        raise ref.missing()
    return ref


def task_for(caller: Caller, pk) -> Task:
    """The task `pk` if the caller may see it; otherwise 404 exactly as if it did not exist."""
    ref = visible_task(caller, pk)
    agent = caller.agent
    found = visible_task_rows(
        task_id=ref.task_id,
        organization_id=caller.organization.pk,
        agent_id=agent.pk if agent is not None else None,
        handle=agent.handle if agent is not None else None,
    )
    if not found:
        raise ref.missing()
    return found[0]


def events_of(task: Task) -> QuerySet[TaskEvent]:
    return task.events.select_related("actor_agent", "recipient").order_by("created_at", "pk")


def comments_of(task: Task) -> QuerySet[TaskComment]:
    """The task's conversation, oldest first (the caller may see the task: `task_for`)."""
    return task.comments.select_related("author").order_by("created_at", "pk")


@dataclass(frozen=True)
class Subtasks:
    """A task's subtasks as its detail shows them: the first `SUBTASKS_LISTED` (oldest first)
    and the progress over all of them (`done` = finished: completed, failed or cancelled)."""

    listed: list[dict]
    done: int
    total: int


def subtasks_of(task: Task) -> Subtasks:
    """One query whatever their number: the counts ride on each listed row as window sums."""
    rows = subtask_rows(task.pk)
    listed = [
        {"id": pk, "title": title, "status": status, "assignee": assignee, "result": result}
        for pk, title, status, assignee, result, _, _ in rows
    ]
    if not rows:
        return Subtasks(listed=[], done=0, total=0)
    _, _, _, _, _, total, done = rows[0]
    return Subtasks(listed=listed, done=done, total=total)


def inbox_of(agent: Agent) -> QuerySet[InboxItem]:
    return (
        InboxItem.objects.filter(agent=agent)
        .select_related("task", "event")
        .order_by("-created_at", "-pk")
    )


def inbox_item_for(agent: Agent, pk) -> InboxItem:
    item_id = parse_id(pk)
    item = InboxItem.objects.filter(agent=agent, pk=item_id).first() if item_id else None
    if item is None:
        raise NotFound(f"Inbox item not found: {pk}", "inbox_item_not_found")
    return item


# --- estimated wait (seed 001's "estimated_wait_time") --------------------------------------


def completion_seconds(agent_ids) -> dict[int, float]:
    """Each agent's mean completion time (assigned → completed); the default without history."""
    default = float(settings.TASKS_DEFAULT_COMPLETION_SECONDS)
    found = defaultdict(list)
    # Each agent's own last COMPLETION_SAMPLE (a window per agent): a sample shared by all of
    # them let one busy expert's history push the others' out, to the default.
    rows = (
        Task.objects.filter(
            assignee_id__in=list(agent_ids),
            status=TaskStatus.COMPLETED,
            assigned_at__isnull=False,
            finished_at__isnull=False,
        )
        .annotate(
            recent=Window(
                RowNumber(), partition_by=[F("assignee_id")], order_by=F("finished_at").desc()
            )
        )
        .filter(recent__lte=COMPLETION_SAMPLE)
        .values_list("assignee_id", "assigned_at", "finished_at")
    )
    for agent_id, assigned_at, finished_at in rows:
        found[agent_id].append(max((finished_at - assigned_at).total_seconds(), 0.0))
    return {pk: (sum(found[pk]) / len(found[pk]) if found[pk] else default) for pk in agent_ids}


def wait_seconds(
    *,
    position: int,
    mean_seconds: float,
    capacity: int,
    free_at: datetime | None = None,
    now: datetime | None = None,
) -> int:
    """A slot frees every mean/capacity seconds on average; the task at `position` waits that many.

    When the expert said when it expects to be free (`availability_until`, seed 001) and that is
    still ahead, its first slot opens then and the rest follow at the measured pace.
    """
    slot = mean_seconds / max(capacity, 1)
    wait = position * slot
    if free_at is not None:
        until = (free_at - (now or timezone.now())).total_seconds()
        if until > 0:
            wait = until + (position - 1) * slot
    # An expert away until 2100 must not overflow the event column: a 500 on every queue.
    return min(int(round(wait)), MAX_WAIT_SECONDS)


def estimated_wait_for_new(*, agent: Agent, urgency_rank: int) -> int:
    """The wait of a task of `urgency_rank` queued for `agent` now (behind the as-urgent ones)."""
    ahead = Task.objects.filter(
        queued_for=agent, status=TaskStatus.QUEUED, urgency_rank__gte=urgency_rank
    ).count()
    mean = completion_seconds([agent.pk])[agent.pk]
    return wait_seconds(
        position=ahead + 1,
        mean_seconds=mean,
        capacity=agent.workload_capacity,
        free_at=agent.availability_until,
    )


def estimated_waits(tasks) -> dict[int, int]:
    """Wait estimates of queued tasks (two queries whatever their number)."""
    queued = [t for t in tasks if t.status == TaskStatus.QUEUED and t.queued_for_id]
    if not queued:
        return {}
    agent_ids = {t.queued_for_id for t in queued}
    order = defaultdict(list)
    for pk, agent_id in (
        Task.objects.filter(queued_for_id__in=agent_ids, status=TaskStatus.QUEUED)
        .order_by("-urgency_rank", "created_at", "pk")
        .values_list("pk", "queued_for_id")
    ):
        order[agent_id].append(pk)
    means = completion_seconds(agent_ids)
    now = timezone.now()
    waits = {}
    for task in queued:
        line = order[task.queued_for_id]
        position = line.index(task.pk) + 1 if task.pk in line else len(line) + 1
        waits[task.pk] = wait_seconds(
            position=position,
            mean_seconds=means[task.queued_for_id],
            capacity=task.queued_for.workload_capacity,
            free_at=task.queued_for.availability_until,
            now=now,
        )
    return waits


# --- approval policies and decisions (docs/decisions.md) ---------------------------------------


def policies_of(org) -> QuerySet[ApprovalPolicy]:
    return ApprovalPolicy.objects.filter(organization=org).select_related("team", "agent")


def decision_counts(policy_ids: list[int]) -> dict[int, dict[str, int]]:
    """How each policy's decisions went: {policy id: {status: count}}, in one query."""
    counts: dict[int, dict[str, int]] = {}
    rows = (
        HumanDecision.objects.filter(policy_id__in=policy_ids)
        .values_list("policy_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for policy_id, status, n in rows:
        counts.setdefault(policy_id, {})[status] = n
    return counts


def decisions_visible_to(caller: Caller) -> QuerySet[HumanDecision]:
    """An organization's decisions; an agent's: those it asked for and those on tasks it sees."""
    rows = HumanDecision.objects.filter(organization=caller.organization).select_related(
        "requested_by"
    )
    if caller.agent is not None:
        seen = tasks_visible_to(caller).values("pk")
        rows = rows.filter(requested_by=caller.agent) | rows.filter(task__in=seen)
    return rows.order_by("-created_at", "-pk")


def decision_for(caller: Caller, pk) -> HumanDecision:
    found = decisions_visible_to(caller).filter(pk=parse_id(pk) or 0).first()
    if found is None:
        raise NotFound(f"Decision not found: {pk}", "decision_not_found")
    return found


def deciders_of(decision: HumanDecision) -> list:
    """The users who decide: the policy's named ones, else the organization's admins."""
    users = get_user_model().objects.filter(
        memberships__organization_id=decision.organization_id, is_active=True
    )
    named = decision.policy.deciders if decision.policy_id else []
    if named:
        return list(users.filter(username__in=named).distinct())
    return list(users.filter(memberships__is_admin=True).distinct())
