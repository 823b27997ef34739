"""What a run gives its model: the agent's system prompt, and its tasks as the input.

The system prompt is the agent's custom prompt plus its organizational context, built fresh when
the run first starts (organization.prompt). The input says what woke the agent and carries, as a
JSON block, each task the run was woken for: the task itself, its parent, its subtasks with their
results, its latest comments and its delegation chain, and whether the agent holds it. Both are
stored on the run, so a resumed run replays the same conversation. The offline routine
(runtime/offline.py) and the benchmark's scripted model read the JSON block back (`context_of`).
"""

from __future__ import annotations

import json
import re

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Prefetch

from organization.models import Agent
from organization.prompt import system_prompt_for
from tasks.models import FINISHED_STATUSES, Task, TaskComment

from .models import Run, RunTrigger

# How many of a task's comments (the latest) and subtasks (the oldest) the input carries.
COMMENTS_GIVEN = 20
SUBTASKS_GIVEN = 50
# Long texts of related tasks are cut in the input (the task itself is given whole).
RELATED_TEXT_CHARS = 2_000

WHAT_WOKE = {
    "created": "a task was assigned to you when it was created",
    "assigned": "a task was assigned to you",
    "auto_assigned": "a task queued for you was assigned to you (you have room again)",
    "delegated": "a task was delegated to you",
    "escalated": "a task was escalated to you",
    "comment": "someone commented on a task of yours",
    "subtasks_done": "all the subtasks of a task you hold are finished",
    "resumed": "you were resumed with a task waiting for you",
}

GUIDE = """\
You act through the tools, as yourself, under the organization's rules. For each task you hold:
- do it yourself when it is yours to do: move it to in_progress (update_task_status), then finish \
it with complete_task and your result;
- or split it into subtasks (create_subtask; you are told when they are all finished), delegate it \
(recommend_delegate, then delegate_task with your DELEGATION DECISION), queue it for a busy expert \
(queue_task) or escalate it (escalate_task);
- comment_on_task to ask or answer a question.
A refused call comes back as an error with its code: choose again. When you stop calling tools, \
your final answer becomes the result of each task you still hold (assigned or in progress) and did \
nothing with; a task waiting for its subtasks stays open."""

JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)


def _cut(text: str, limit: int = RELATED_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _handle(agent: Agent | None) -> str | None:
    return agent.handle if agent is not None else None


def _task_json(task: Task, agent: Agent, triggers: list[str]) -> dict:
    parent = task.parent
    subtasks = list(task.subtasks.all())
    comments = list(task.latest_comments)[::-1]
    return {
        "id": task.pk,
        "title": task.title,
        "description": task.description,
        "required_expertise": task.required_expertise,
        "urgency": task.urgency,
        "deadline": task.deadline,
        "status": task.status,
        "holder": _handle(task.assignee),
        "queued_for": _handle(task.queued_for),
        "you_hold_it": task.assignee_id == agent.pk,
        "created_by": _handle(task.created_by_agent) or "a human",
        "delegation_chain": list(task.delegation_chain),
        "result": task.result,
        "result_data": task.result_data,
        "woke_you": triggers,
        "parent": None
        if parent is None
        else {
            "id": parent.pk,
            "title": parent.title,
            "description": _cut(parent.description),
            "status": parent.status,
            "holder": _handle(parent.assignee),
        },
        "subtasks": [
            {
                "id": s.pk,
                "title": s.title,
                "required_expertise": s.required_expertise,
                "status": s.status,
                "holder": _handle(s.assignee),
                "result": _cut(s.result),
            }
            for s in subtasks[:SUBTASKS_GIVEN]
        ],
        "subtask_progress": {
            "done": sum(s.status in FINISHED_STATUSES for s in subtasks),
            "total": len(subtasks),
        },
        "comments": [
            {"author": c.author_label, "body": _cut(c.body), "at": c.created_at} for c in comments
        ],
    }


def build(run: Run) -> tuple[str, str, dict]:
    """(system prompt, input, context) of the run, from the organization as it is now."""
    agent = run.agent
    triggers = list(RunTrigger.objects.filter(run=run).order_by("pk"))
    order: dict[int, list[str]] = {}
    for t in triggers:
        if t.task_id is not None:
            order.setdefault(t.task_id, []).append(t.trigger)
    tasks = {
        t.pk: t
        for t in Task.objects.filter(pk__in=list(order), organization_id=agent.organization_id)
        .select_related("assignee", "queued_for", "created_by_agent", "parent__assignee")
        .prefetch_related(
            Prefetch(
                "subtasks",
                queryset=Task.objects.select_related("assignee").order_by("created_at", "pk"),
            ),
            Prefetch(
                "comments",
                queryset=TaskComment.objects.order_by("-created_at", "-pk"),
                to_attr="all_comments",
            ),
        )
    }
    for task in tasks.values():
        task.latest_comments = task.all_comments[:COMMENTS_GIVEN]
    reports = list(agent.reports.order_by("handle").values_list("handle", flat=True))
    context = {
        "run": run.pk,
        "agent": {
            "id": agent.handle,
            "name": agent.name,
            "role": agent.role,
            "expertise": list(agent.expertise),
            "reports": reports,
        },
        "tasks": [
            _task_json(tasks[pk], agent, kinds) for pk, kinds in order.items() if pk in tasks
        ],
    }
    context = json.loads(json.dumps(context, cls=DjangoJSONEncoder))
    woke = "; ".join(f"{WHAT_WOKE.get(t.trigger, t.trigger)} (task #{t.task_id})" for t in triggers)
    text = (
        f"You are {agent.name} ({agent.handle}); this is your managed run #{run.pk}. "
        f"Work has reached you: {woke or 'nothing in particular'}.\n\n"
        f"```json\n{json.dumps(context, indent=1, ensure_ascii=False)}\n```\n\n{GUIDE}"
    )
    return system_prompt_for(agent), text, context


def context_of(text: str) -> dict | None:
    """The JSON block of a run's input (None if `text` has none)."""
    found = JSON_BLOCK.search(text or "")
    if found is None:
        return None
    try:
        return json.loads(found.group(1))
    except json.JSONDecodeError:
        return None
