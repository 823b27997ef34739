"""Task tools of the registry: the same services as REST, for call-tool and MCP.

Each tool is validated by the serializer of its REST twin (tasks/serializers.py): a move's
params are its REST body plus the task_id its path names.
"""

from django.conf import settings

from organization.caller import Caller
from organization.registry import register_tool
from organization.selectors import agent_by_handle

from . import services
from .decisions import decision_json
from .recommend import recommend
from .rules import Actor
from .selectors import (
    comments_of,
    decision_for,
    estimated_waits,
    inbox_of,
    task_for,
    tasks_visible_to,
    visible_task,
)
from .serializers import (
    ALL,
    TASK_RELATIONS,
    AssignParamsSerializer,
    CancelParamsSerializer,
    CommentListParamsSerializer,
    CommentParamsSerializer,
    CompleteParamsSerializer,
    DelegateParamsSerializer,
    EscalateParamsSerializer,
    InboxItemSerializer,
    InboxParamsSerializer,
    MyTasksParamsSerializer,
    QueueParamsSerializer,
    RecommendationParamsSerializer,
    StatusParamsSerializer,
    SubtaskCreateSerializer,
    TaskCommentSerializer,
    TaskCreateSerializer,
    TaskIdSerializer,
    TaskSerializer,
    task_data,
    task_detail,
)
from .serializers.decisions import AskHumanSerializer, DecisionIdSerializer


def _page_size(params: dict) -> int:
    """The tool door's lists have REST's maximum page size (API_MAX_PAGE_SIZE) too."""
    return min(params["limit"], settings.API_MAX_PAGE_SIZE)


def _task_json(task) -> dict:
    return task_data(task)


def _agent(caller: Caller, handle: str):
    return agent_by_handle(org=caller.organization, handle=handle)


def _move(caller: Caller, params: dict, service, **kwargs) -> dict:
    """Run a move service on the caller's task (404 for a task it cannot see) as the caller.

    The task goes in unread (`visible_task`), as at the REST door: the move reads it once, under
    its row lock, through the caller's view (404 if the caller may not see it)."""
    task = visible_task(caller, params.pop("task_id"))
    return _task_json(service(task=task, actor=Actor.of(caller), **params, **kwargs))


@register_tool(
    "create_task",
    "Create a task; with agent_id it is assigned to that agent (rules checked), else queued; "
    "with parent, a subtask of a task you hold.",
    TaskCreateSerializer,
    read_only=False,
)
def create_task(caller: Caller, params: dict) -> dict:
    handle, parent = params.pop("agent_id"), params.pop("parent")
    task = services.task_create(
        org=caller.organization,
        actor=Actor.of(caller),
        assignee=_agent(caller, handle) if handle else None,
        parent=visible_task(caller, parent) if parent else None,
        **params,
    )
    return _task_json(task)


@register_tool(
    "create_subtask",
    "Split a task you hold: create a subtask of it (parent), assigned to agent_id (rules checked) "
    "or queued. When its last open subtask finishes you get a subtasks_done inbox item.",
    SubtaskCreateSerializer,
    read_only=False,
)
def create_subtask(caller: Caller, params: dict) -> dict:
    return create_task(caller, params)


@register_tool(
    "get_task",
    "One task you may see, in full: status, holder, result and result_data, parent, and its "
    "subtasks with their progress.",
    TaskIdSerializer,
    needs_agent=False,
    read_only=True,
)
def get_task(caller: Caller, params: dict) -> dict:
    return task_detail(task_for(caller, params["task_id"]))


@register_tool(
    "assign_task",
    "Assign a task to an agent; without agent_id you claim it yourself.",
    AssignParamsSerializer,
    read_only=False,
)
def assign_task(caller: Caller, params: dict) -> dict:
    # The handle goes in unread, as at the REST door: the move looks it up with its row lock.
    return _move(caller, params, services.task_assign, to=params.pop("agent_id") or None)


@register_tool(
    "delegate_task",
    "Delegate a task you hold, with your DELEGATION DECISION (primary reason, fallback, reasoning, notes).",
    DelegateParamsSerializer,
    read_only=False,
)
def delegate_task(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_delegate, to=params.pop("agent_id"))


@register_tool(
    "queue_task",
    "Queue a task for a busy (at capacity, not offline) expert; it is assigned when they have room. "
    "With your DELEGATION DECISION (primary reason, fallback, reasoning, notes, wait time).",
    QueueParamsSerializer,
    read_only=False,
)
def queue_task(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_queue, to=params.pop("agent_id"))


@register_tool(
    "escalate_task",
    "Escalate a task to your senior, else the default supervisor, else humans. "
    "With your DELEGATION DECISION (primary reason, fallback, reasoning, notes).",
    EscalateParamsSerializer,
    read_only=False,
)
def escalate_task(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_escalate)


@register_tool(
    "update_task_status",
    "Move a task you hold: assigned → in_progress → blocked ⇄ in_progress → completed | failed.",
    StatusParamsSerializer,
    read_only=False,
    # completed and failed cannot be undone.
    destructive=True,
)
def update_task_status(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_set_status)


@register_tool(
    "complete_task",
    "Finish a task you hold (in progress) with its result: completed (default) or failed, the "
    "outcome in words (result) and as a JSON object (result_data). Its creator and whoever "
    "delegated it to you are told.",
    CompleteParamsSerializer,
    read_only=False,
    # completed and failed cannot be undone.
    destructive=True,
)
def complete_task(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_set_status)


@register_tool(
    "cancel_task",
    "Cancel a task you created. One with open subtasks is refused (open_subtasks) unless "
    "cancel_subtasks is true: then every open subtask under it is cancelled with it.",
    CancelParamsSerializer,
    needs_agent=False,
    read_only=False,
    # cancelled cannot be undone.
    destructive=True,
)
def cancel_task(caller: Caller, params: dict) -> dict:
    return _move(caller, params, services.task_cancel)


@register_tool(
    "comment_on_task",
    "Comment on a task you may see: its holder, creator and whoever delegated it are told "
    "(never you).",
    CommentParamsSerializer,
    needs_agent=False,
    read_only=False,
)
def comment_on_task(caller: Caller, params: dict) -> dict:
    task = task_for(caller, params["task_id"])
    comment = services.task_comment(task=task, actor=Actor.of(caller), body=params["body"])
    return TaskCommentSerializer(comment).data


@register_tool(
    "list_task_comments",
    "The comments on a task you may see, oldest first.",
    CommentListParamsSerializer,
    needs_agent=False,
    read_only=True,
)
def list_task_comments(caller: Caller, params: dict) -> dict:
    comments = comments_of(task_for(caller, params["task_id"]))
    start = params["offset"]
    page = list(comments[start : start + _page_size(params)])
    return {
        "comments": TaskCommentSerializer(page, many=True).data,
        "count": len(page),
        "total": comments.count(),
    }


@register_tool(
    "get_my_tasks",
    "Your tasks: held, queued for you, created by you or passed through you.",
    MyTasksParamsSerializer,
    read_only=True,
)
def get_my_tasks(caller: Caller, params: dict) -> dict:
    tasks = tasks_visible_to(caller).order_by("-created_at", "-pk")
    if params.get("status"):
        tasks = tasks.filter(status=params["status"])
    role = params["role"]
    if caller.agent is not None and role != ALL:
        tasks = tasks.filter(**{TASK_RELATIONS[role]: caller.agent})
    items = list(tasks[: _page_size(params)])
    data = TaskSerializer(items, many=True, context={"waits": estimated_waits(items)}).data
    return {"tasks": data, "count": len(data)}


@register_tool(
    "get_inbox",
    "What reached you, newest first, with read/unread: tasks assigned, delegated, escalated or "
    "queued to you; tasks you created or delegated finished (status_changed); comments; "
    "subtasks_done.",
    InboxParamsSerializer,
    read_only=False,
    # It writes only read marks: calling it again changes nothing more.
    idempotent=True,
)
def get_inbox(caller: Caller, params: dict) -> dict:
    agent = caller.require_agent()
    items = inbox_of(agent)
    if params.get("unread_only"):
        items = items.filter(read_at__isnull=True)
    items = list(items[: _page_size(params)])
    data = InboxItemSerializer(items, many=True).data
    if params.get("mark_read"):
        services.inbox_mark_read(agent=agent, item_ids=[i.pk for i in items])
    return {
        "items": data,
        "count": len(data),
        "unread": inbox_of(agent).filter(read_at__isnull=True).count(),
    }


@register_tool(
    "recommend_delegate",
    "Seed 001's delegation framework: ranked candidates (tiers 1-5) and DELEGATE / QUEUE / ESCALATE.",
    RecommendationParamsSerializer,
    needs_agent=False,
    read_only=True,
)
def recommend_delegate(caller: Caller, params: dict) -> dict:
    return recommend_for(caller, params)


def recommend_for(caller: Caller, params: dict) -> dict:
    """The recommendation for the caller (a human may name the agent): REST and the tool."""
    agent = caller.agent
    if agent is None and params.get("agent"):
        agent = _agent(caller, params["agent"])
    return recommend(
        org=caller.organization,
        agent=agent,
        expertise=params["expertise"],
        urgency=params["urgency"],
        exclude=tuple(params["exclude"]),
    )


# --- humans decide (docs/decisions.md) ---------------------------------------------------------


@register_tool(
    "ask_human",
    "Ask a human a question about a task you hold (with up to 8 options to choose from). The "
    "task stays with you; the answer reaches your inbox as a decision item (a managed agent is "
    "woken by it): end your turn now rather than guess.",
    AskHumanSerializer,
    read_only=False,
    ends_turn=True,
)
def ask_human(caller: Caller, params: dict) -> dict:
    decision = services.decision_ask(
        caller=caller,
        task_id=params["task"],
        question=params["question"],
        options=params.get("options"),
    )
    return decision_json(decision)


@register_tool(
    "get_decision",
    "One decision you asked for or that is on a task you may see: its status, the answer or "
    "comment, and the outcome of an approved move.",
    DecisionIdSerializer,
    needs_agent=False,
    read_only=True,
)
def get_decision(caller: Caller, params: dict) -> dict:
    return decision_json(decision_for(caller, params["decision_id"]))
