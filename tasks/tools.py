"""Task tools of the registry: the same services as REST, for call-tool and MCP."""

from django.conf import settings

from organization.caller import Caller
from organization.registry import register_tool
from organization.selectors import agent_by_handle

from . import services
from .models import (
    DESCRIPTION_MAX_LENGTH,
    MAX_WAIT_SECONDS,
    NOTE_MAX_LENGTH,
    TaskStatus,
    Urgency,
)
from .recommend import recommend
from .rules import Actor
from .selectors import estimated_waits, inbox_of, task_for, tasks_visible_to
from .serializers import InboxItemSerializer, TaskSerializer

TASK_ID = {"type": "integer", "description": "The task's id."}
AGENT_ID = {"type": "string", "description": "An agent's id (handle), e.g. agent-alex."}
# The REST serializers' limits (tasks/serializers.py), so both doors refuse the same input.
TEXT = {"type": "string", "maxLength": NOTE_MAX_LENGTH}


def text(description: str) -> dict:
    return {**TEXT, "description": description}


LIMIT = {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most (default 100)."}


def _schema(properties: dict, required: list[str]) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _page_size(params: dict) -> int:
    """The tool door's lists have REST's maximum page size (API_MAX_PAGE_SIZE) too."""
    return min(params.get("limit", 100), settings.API_MAX_PAGE_SIZE)


def _task_json(task) -> dict:
    return TaskSerializer(task).data


def _agent(caller: Caller, handle: str):
    return agent_by_handle(org=caller.organization, handle=handle)


def _move(caller: Caller, params: dict, service, **kwargs) -> dict:
    """Run a move service on the caller's task (404 for a task it cannot see) as the caller."""
    task = task_for(caller, params["task_id"])
    return _task_json(service(task=task, actor=Actor.of(caller), **kwargs))


def _parse_deadline(value):
    if not value:
        return None
    from rest_framework import serializers

    from organization.errors import Invalid

    try:
        return serializers.DateTimeField().to_internal_value(value)
    except serializers.ValidationError:
        raise Invalid("Invalid param 'deadline': use ISO 8601.") from None


@register_tool(
    "create_task",
    "Create a task; with agent_id it is assigned to that agent (rules checked), else queued.",
    _schema(
        {
            "title": {
                "type": "string",
                "minLength": 1,
                "maxLength": 300,
                "description": "What to do.",
            },
            "description": {**text("Details of the work."), "maxLength": DESCRIPTION_MAX_LENGTH},
            "required_expertise": {
                "type": "string",
                "maxLength": 100,
                "description": "The expertise it needs.",
            },
            "urgency": {
                "type": "string",
                "enum": list(Urgency.values),
                "description": "Default normal.",
            },
            "deadline": {"type": "string", "description": "When it is due, ISO 8601."},
            "agent_id": {**AGENT_ID, "description": "Assign it to this agent (its id)."},
        },
        ["title"],
    ),
    read_only=False,
)
def create_task(caller: Caller, params: dict) -> dict:
    handle = params.get("agent_id")
    task = services.task_create(
        org=caller.organization,
        actor=Actor.of(caller),
        title=params["title"],
        description=params.get("description", ""),
        required_expertise=params.get("required_expertise", ""),
        urgency=params.get("urgency", Urgency.NORMAL),
        deadline=_parse_deadline(params.get("deadline")),
        assignee=_agent(caller, handle) if handle else None,
    )
    return _task_json(task)


@register_tool(
    "assign_task",
    "Assign a task to an agent; without agent_id you claim it yourself.",
    _schema(
        {"task_id": TASK_ID, "agent_id": {**AGENT_ID, "description": "To whom (default you)."}},
        ["task_id"],
    ),
    read_only=False,
)
def assign_task(caller: Caller, params: dict) -> dict:
    to = _agent(caller, params["agent_id"]) if params.get("agent_id") else None
    return _move(caller, params, services.task_assign, to=to)


# Seed 001's DELEGATION DECISION, accepted by delegate, queue and escalate alike.
DECISION = {
    "primary_reason": text("Why your primary choice (its reason)."),
    "fallback": text("Your fallback choice and its reason."),
    "reasoning": text("Your reasoning, 1-2 sentences."),
    "notes": text("Special context (the decision's Notes)."),
}
DECISION_FIELDS = tuple(DECISION)


def _decision(params: dict) -> dict:
    return {k: params.get(k) or "" for k in DECISION_FIELDS}


@register_tool(
    "delegate_task",
    "Delegate a task you hold, with your DELEGATION DECISION (primary reason, fallback, reasoning, notes).",
    _schema({"task_id": TASK_ID, "agent_id": AGENT_ID, **DECISION}, ["task_id", "agent_id"]),
    read_only=False,
)
def delegate_task(caller: Caller, params: dict) -> dict:
    to = _agent(caller, params["agent_id"])
    return _move(caller, params, services.task_delegate, to=to, **_decision(params))


@register_tool(
    "queue_task",
    "Queue a task for a busy (at capacity, not offline) expert; it is assigned when they have room. "
    "With your DELEGATION DECISION (primary reason, fallback, reasoning, notes, wait time).",
    _schema(
        {
            "task_id": TASK_ID,
            "agent_id": {**AGENT_ID, "description": "The busy expert to queue it for."},
            **DECISION,
            "wait_time_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_WAIT_SECONDS,
                "description": "Your wait estimate; omit for the service's estimate.",
            },
        },
        ["task_id", "agent_id"],
    ),
    read_only=False,
)
def queue_task(caller: Caller, params: dict) -> dict:
    to = _agent(caller, params["agent_id"])
    return _move(
        caller, params, services.task_queue, to=to, **_decision(params),
        wait_time_seconds=params.get("wait_time_seconds"),
    )  # fmt: skip


@register_tool(
    "escalate_task",
    "Escalate a task to your senior, else the default supervisor, else humans. "
    "With your DELEGATION DECISION (primary reason, fallback, reasoning, notes).",
    _schema({"task_id": TASK_ID, "reason": text("Why you escalate it."), **DECISION}, ["task_id"]),
    read_only=False,
)
def escalate_task(caller: Caller, params: dict) -> dict:
    return _move(
        caller, params, services.task_escalate, reason=params.get("reason") or "",
        **_decision(params),
    )  # fmt: skip


@register_tool(
    "update_task_status",
    "Move a task you hold: assigned → in_progress → blocked ⇄ in_progress → completed | failed.",
    _schema(
        {
            "task_id": TASK_ID,
            "status": {
                "type": "string",
                "enum": [
                    TaskStatus.IN_PROGRESS,
                    TaskStatus.BLOCKED,
                    TaskStatus.COMPLETED,
                    TaskStatus.FAILED,
                ],
                "description": "The new status (completed and failed are final).",
            },
            "note": text("A note for the task's log."),
        },
        ["task_id", "status"],
    ),
    read_only=False,
    # completed and failed cannot be undone.
    destructive=True,
)
def update_task_status(caller: Caller, params: dict) -> dict:
    return _move(
        caller, params, services.task_set_status, status=params["status"],
        note=params.get("note", ""),
    )  # fmt: skip


@register_tool(
    "get_my_tasks",
    "Your tasks: held, queued for you, created by you or passed through you.",
    _schema(
        {
            "status": {
                "type": "string",
                "enum": list(TaskStatus.values),
                "description": "Only this status.",
            },
            "role": {
                "type": "string",
                "enum": ["all", "assigned", "queued_for", "created"],
                "description": "Which relation to you (default all).",
            },
            "limit": LIMIT,
        },
        [],
    ),
    read_only=True,
)
def get_my_tasks(caller: Caller, params: dict) -> dict:
    tasks = tasks_visible_to(caller).order_by("-created_at", "-pk")
    if params.get("status"):
        tasks = tasks.filter(status=params["status"])
    role = params.get("role", "all")
    if caller.agent is not None and role != "all":
        field = {"assigned": "assignee", "queued_for": "queued_for", "created": "created_by_agent"}
        tasks = tasks.filter(**{field[role]: caller.agent})
    items = list(tasks[: _page_size(params)])
    data = TaskSerializer(items, many=True, context={"waits": estimated_waits(items)}).data
    return {"tasks": data, "count": len(data)}


@register_tool(
    "get_inbox",
    "What was assigned, delegated, escalated or queued to you, newest first, with read/unread.",
    _schema(
        {
            "unread_only": {"type": "boolean", "description": "Only unread items."},
            "mark_read": {"type": "boolean", "description": "Mark the returned items read."},
            "limit": LIMIT,
        },
        [],
    ),
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
    _schema(
        {
            "expertise": {
                "type": "string",
                "minLength": 1,
                "description": "The expertise the task needs.",
            },
            "urgency": {
                "type": "string",
                "enum": list(Urgency.values),
                "description": "Default normal.",
            },
            "exclude": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Agent ids to leave out.",
            },
            "agent": {"type": "string", "description": "Organization keys only: for which agent."},
        },
        ["expertise"],
    ),
    needs_agent=False,
    read_only=True,
)
def recommend_delegate(caller: Caller, params: dict) -> dict:
    agent = caller.agent
    if agent is None and params.get("agent"):
        agent = _agent(caller, params["agent"])
    return recommend(
        org=caller.organization,
        agent=agent,
        expertise=params["expertise"],
        urgency=params.get("urgency", Urgency.NORMAL),
        exclude=tuple(params.get("exclude", [])),
    )
