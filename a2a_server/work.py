"""A2A messages and task reads over the tasks engine, the source of truth: no other task store.

Synchronous (the ORM); the request handler runs these off the event loop.
"""

import uuid
from datetime import UTC, datetime, timedelta

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    UnsupportedOperationError,
)
from django.db.models import Q, QuerySet
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value

from infrastructure.errors import (
    DomainError,
    Invalid,
    NotFound,
    first_validation_message,
    tell_refused,
)
from infrastructure.inputs import check_input, parse_id
from organization.caller import Caller
from organization.history import acting_as
from organization.models import Agent
from organization.selectors import agent_by_handle
from tasks import services
from tasks.models import (
    FINISHED_STATUSES,
    DecisionStatus,
    HumanDecision,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
)
from tasks.rules import Actor
from tasks.selectors import task_for, tasks_visible_to, visible_task
from tasks.serializers import TaskCreateSerializer

TITLE_MAX = 200
# The most messages of a task's conversation one answer carries.
HISTORY_MAX = 100
STATES = {
    TaskStatus.QUEUED: pb.TASK_STATE_SUBMITTED,
    TaskStatus.ASSIGNED: pb.TASK_STATE_SUBMITTED,
    TaskStatus.ESCALATED: pb.TASK_STATE_SUBMITTED,
    TaskStatus.IN_PROGRESS: pb.TASK_STATE_WORKING,
    TaskStatus.COMPLETED: pb.TASK_STATE_COMPLETED,
    TaskStatus.CANCELLED: pb.TASK_STATE_CANCELED,
    TaskStatus.BLOCKED: pb.TASK_STATE_FAILED,
    TaskStatus.FAILED: pb.TASK_STATE_FAILED,
}


def json_value(value) -> Value:
    found = Value()
    json_format.ParseDict(value, found)
    return found


def agent_message(text: str, *, task_id: str, metadata: dict | None = None) -> pb.Message:
    message = pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.ROLE_AGENT,
        task_id=task_id,
        context_id=task_id,
        parts=[pb.Part(text=text)],
    )
    if metadata:
        message.metadata.update(metadata)
    return message


def reason_of(task: Task) -> str:
    """Why a task failed or is blocked: its result, else the last event's words."""
    if task.result:
        return task.result
    event = TaskEvent.objects.filter(task=task).exclude(message="").order_by("-pk").first()
    return event.message if event else task.status


def waiting_on_a_human(tasks: list[Task]) -> set[int]:
    """Which of `tasks` a pending human decision holds up (one query)."""
    rows = HumanDecision.objects.filter(task__in=tasks, status=DecisionStatus.PENDING)
    return set(rows.values_list("task_id", flat=True))


def a2a_task(task: Task, waiting: set[int] | None = None) -> pb.Task:
    """The engine's task as an A2A task: id and contextId are the task's id. `waiting`: the
    tasks a pending decision holds up, when known."""
    task_id = str(task.pk)
    if waiting is None:
        waiting = waiting_on_a_human([task])
    state = STATES.get(task.status, pb.TASK_STATE_SUBMITTED)
    if task.status not in FINISHED_STATUSES and task.pk in waiting:
        state = pb.TASK_STATE_INPUT_REQUIRED
    status = pb.TaskStatus(state=state)
    status.timestamp.FromDatetime(task.updated_at)
    if state == pb.TASK_STATE_FAILED:
        status.message.CopyFrom(agent_message(reason_of(task), task_id=task_id))
    found = pb.Task(id=task_id, context_id=task_id, status=status)
    if task.status == TaskStatus.COMPLETED:
        parts = []
        if task.result or task.result_data is None:
            parts.append(pb.Part(text=task.result))
        if task.result_data is not None:
            parts.append(pb.Part(data=json_value(task.result_data)))
        found.artifacts.append(
            pb.Artifact(artifact_id=f"{task_id}-result", name="result", parts=parts)
        )
    return found


def rejected(exc: DomainError) -> pb.Task:
    """A refusal by the rules: a task in REJECTED carrying the rule's text and code."""
    task_id = str(uuid.uuid4())
    status = pb.TaskStatus(
        state=pb.TASK_STATE_REJECTED,
        message=agent_message(exc.message, task_id=task_id, metadata={"code": exc.code}),
    )
    return pb.Task(id=task_id, context_id=task_id, status=status)


def text_of(message: pb.Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text")).strip()


def check_message(message: pb.Message) -> None:
    """A message's parts are text (and JSON data): a file is not taken, nor a message without
    text."""
    for part in message.parts:
        if part.HasField("raw") or part.HasField("url"):
            raise ContentTypeNotSupportedError(
                f"This agent takes text, not files ({part.media_type or 'no media type'})."
            )
    if not text_of(message):
        raise InvalidParamsError("The message has no text.")


def known_task(caller: Caller, context_id: str) -> Task | None:
    """The task a contextId names, if the caller may see it."""
    if not context_id:
        return None
    try:
        return task_for(caller, context_id)
    except DomainError:
        return None


def task_fields(text: str) -> dict:
    """Title and description of the task a message creates, checked as POST /api/tasks checks
    its body (400 `invalid`, not a refusal)."""
    check_input(text, "message")
    body = TaskCreateSerializer(
        data={"title": (text.splitlines() or [""])[0][:TITLE_MAX], "description": text}
    )
    if not body.is_valid():
        raise Invalid(first_validation_message(body.errors))
    return {
        "title": body.validated_data["title"],
        "description": body.validated_data["description"],
    }


def continued_task(caller: Caller, message: pb.Message) -> Task | None:
    """The task a message continues: the one its taskId names (not found if the caller may not
    see it; its contextId, when given, must be the task's; an ended task takes no message), else
    the one its contextId names, if any."""
    if not message.task_id:
        return known_task(caller, message.context_id)
    task = task_for(caller, message.task_id)
    if message.context_id and message.context_id != str(task.pk):
        raise InvalidParamsError(
            f"contextId {message.context_id} is not the context of task {task.pk}."
        )
    if task.status in FINISHED_STATUSES:
        raise UnsupportedOperationError(f"Task {task.pk} is {task.status}: it takes no message.")
    return task


def send(caller: Caller, agent: Agent, message: pb.Message) -> pb.Task:
    """A message to `agent`: a comment on the task it continues, else a new task for it."""
    text = text_of(message)
    task = continued_task(caller, message)
    fields = task_fields(text)
    try:
        # No transaction around: the services hold their own, as at the REST door (a gated
        # move's decision is kept when it raises AwaitingApproval).
        with acting_as(caller):
            if task is not None:
                services.task_comment(task=task, actor=Actor.of(caller), body=text)
                return a2a_task(task_for(caller, task.pk))
            created = services.task_create(
                org=caller.organization,
                actor=Actor.of(caller),
                assignee=agent,
                **fields,
            )
    except DomainError as exc:
        tell_refused(exc, caller=caller)  # counted by code, as at the other doors
        return rejected(exc)
    return a2a_task(created)


def get(caller: Caller, task_id: str, history_length: int | None = 0) -> pb.Task:
    """A task the caller may see, with the last `history_length` messages of its conversation
    (None: all of them, up to HISTORY_MAX)."""
    task = task_for(caller, task_id)
    found = a2a_task(task)
    if history_length != 0:
        found.history.extend(histories([task], history_length)[task.pk])
    return found


def histories(tasks: list[Task], length: int | None) -> dict[int, list[pb.Message]]:
    """Each task's conversation as messages, oldest first: the message that opened it (its
    description, else its title) then its comments, the assignee's as the agent's; the last
    `length` of them, at most HISTORY_MAX (one query)."""
    if length is not None and length < 0:
        raise InvalidParamsError("historyLength must not be negative.")
    length = min(length if length is not None else HISTORY_MAX, HISTORY_MAX)
    found = {
        task.pk: [
            pb.Message(
                message_id=f"{task.pk}-opening",
                role=pb.ROLE_USER,
                task_id=str(task.pk),
                context_id=str(task.pk),
                parts=[pb.Part(text=task.description or task.title)],
            )
        ]
        for task in tasks
    }
    holders = {task.pk: task.assignee_id for task in tasks}
    for comment in TaskComment.objects.filter(task__in=tasks).order_by(
        "task_id", "created_at", "pk"
    ):
        spoke = comment.author_id is not None and comment.author_id == holders[comment.task_id]
        found[comment.task_id].append(
            pb.Message(
                message_id=f"comment-{comment.pk}",
                role=pb.ROLE_AGENT if spoke else pb.ROLE_USER,
                task_id=str(comment.task_id),
                context_id=str(comment.task_id),
                parts=[pb.Part(text=comment.body)],
            )
        )
    return {
        pk: messages[len(messages) - length :] if length else [] for pk, messages in found.items()
    }


def in_state(rows: QuerySet[Task], state: int) -> QuerySet[Task]:
    """`rows` whose A2A state is `state` (STATES, and a pending decision for INPUT_REQUIRED)."""
    pending = Q(decisions__status=DecisionStatus.PENDING) & ~Q(status__in=FINISHED_STATUSES)
    if state == pb.TASK_STATE_INPUT_REQUIRED:
        return rows.filter(pending).distinct()
    statuses = [status for status, mapped in STATES.items() if mapped == state]
    return rows.filter(status__in=statuses).exclude(pending)


PAGE_SIZE, PAGE_MAX = 50, 100
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def page_token(task: Task) -> str:
    """Where the next page starts: after this task, in status-timestamp order."""
    return f"{(task.updated_at - EPOCH) // MICROSECOND}.{task.pk}"


def after_token(rows: QuerySet[Task], token: str) -> QuerySet[Task]:
    try:
        micros, pk = token.split(".")
        updated, pk = EPOCH + int(micros) * MICROSECOND, parse_id(pk)
        if pk is None:  # no task has that id
            raise ValueError(pk)
    except (ValueError, OverflowError):
        raise InvalidParamsError(f"pageToken {token[:50]!r} is not one this server gave.") from None
    return rows.filter(Q(updated_at__lt=updated) | Q(updated_at=updated, pk__lt=pk))


def listed(caller: Caller, agent: Agent, request: pb.ListTasksRequest) -> pb.ListTasksResponse:
    """The tasks held by or queued for `agent` that the caller may see, the latest status change
    first, a page at a time (`pageToken`); by `contextId` (a task id), `status` and
    `statusTimestampAfter` when asked; artifacts only with `includeArtifacts`, the conversation
    only with `historyLength`."""
    if request.page_size < 0:
        raise InvalidParamsError("pageSize must be between 1 and 100.")
    rows = tasks_visible_to(caller).filter(Q(assignee=agent) | Q(queued_for=agent))
    if request.context_id:
        rows = rows.filter(pk=parse_id(request.context_id) or 0)
    if request.status:
        rows = in_state(rows, request.status)
    if request.HasField("status_timestamp_after"):
        after = request.status_timestamp_after.ToDatetime(tzinfo=UTC)
        rows = rows.filter(updated_at__gt=after)
    total = rows.count()
    rows = rows.order_by("-updated_at", "-pk")
    if request.page_token:
        rows = after_token(rows, request.page_token)
    size = min(request.page_size or PAGE_SIZE, PAGE_MAX)
    page = list(rows[: size + 1])
    more, page = len(page) > size, page[:size]
    waiting = waiting_on_a_human(page)
    tasks = [a2a_task(task, waiting) for task in page]
    if not request.include_artifacts:
        for task in tasks:
            del task.artifacts[:]
    if request.history_length:
        conversations = histories(page, request.history_length)
        for row, task in zip(page, tasks, strict=True):
            task.history.extend(conversations[row.pk])
    return pb.ListTasksResponse(
        tasks=tasks,
        next_page_token=page_token(page[-1]) if more else "",
        page_size=len(tasks),
        total_size=total,
    )


def cancel(caller: Caller, task_id: str) -> pb.Task:
    with acting_as(caller):
        task = services.task_cancel(task=visible_task(caller, task_id), actor=Actor.of(caller))
    return a2a_task(task)


def agent_of(caller: Caller, org_slug: str, handle: str) -> Agent:
    """The agent a URL names, in the caller's organization; any other is not found."""
    if caller.organization.slug != org_slug:
        raise NotFound(f"Agent not found: {handle}", "agent_not_found")
    return agent_by_handle(org=caller.organization, handle=handle)
