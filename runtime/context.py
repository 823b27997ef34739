"""What a run gives its model: the agent's system prompt, and its tasks as the input.

Both are stored on the run (a resumed run replays them); `context_of` reads the JSON block back."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from django.core.serializers.json import DjangoJSONEncoder

from organization.models import Agent
from organization.prompt import system_prompt_for
from tasks.decisions import decision_json
from tasks.models import FINISHED_STATUSES, HumanDecision

from . import sql
from .models import Run

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
    "decision": "a human decided what you asked about a task (its `decisions`)",
    "resumed": "you were resumed with a task waiting for you",
}

GUIDE = """\
You act through the tools, as yourself, under the organization's rules. For each task you hold:
- do it yourself when it is yours to do: move it to in_progress (update_task_status), then finish \
it with complete_task and your result;
- or split it into subtasks (create_subtask; you are told when they are all finished), delegate it \
(recommend_delegate, then delegate_task with your DELEGATION DECISION), queue it for a busy expert \
(queue_task) or escalate it (escalate_task);
- comment_on_task to ask or answer a question; ask_human when only a human can answer (the task \
stays yours and the answer wakes you). A move that answers {"status": "awaiting_approval"} waits \
for a human: its decision wakes you.
A refused call comes back as an error with its code: choose again. When you stop calling tools, \
your final answer becomes the result of each task you still hold (assigned or in progress) and did \
nothing with; a task waiting for its subtasks stays open."""

JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)


def _cut(text: str, limit: int = RELATED_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_value(text: str | None):
    return None if text is None else json.loads(text)


def _parent_json(row: dict, agent: Agent) -> dict | None:
    """The parent task, in full only if the agent may see it (tasks.visibility.visible_to_agent:
    created, held, queued for, passed on); else its id alone, as GET /api/tasks/<id> gives it."""
    if row["parent_id"] is None:
        return None
    chain = _json_value(row["parent__delegation_chain"]) or []
    if agent.pk not in (
        row["parent__assignee_id"],
        row["parent__created_by_agent_id"],
        row["parent__queued_for_id"],
    ) and agent.handle.lower() not in (h.lower() for h in chain):
        return {"id": row["parent_id"]}
    return {
        "id": row["parent_id"],
        "title": row["parent__title"],
        "description": _cut(row["parent__description"]),
        "status": row["parent__status"],
        "holder": row["parent__assignee__handle"],
    }


def _task_json(row: dict, agent: Agent, triggers: list[str], subtasks: list, comments: list):
    return {
        "id": row["pk"],
        "title": row["title"],
        "description": row["description"],
        "required_expertise": row["required_expertise"],
        "urgency": row["urgency"],
        "deadline": row["deadline"],
        "status": row["status"],
        "holder": row["assignee__handle"],
        "queued_for": row["queued_for__handle"],
        "you_hold_it": row["assignee_id"] == agent.pk,
        "created_by": row["created_by_agent__handle"] or "a human",
        "delegation_chain": list(_json_value(row["delegation_chain"]) or []),
        "result": row["result"],
        "result_data": _json_value(row["result_data"]),
        "woke_you": triggers,
        "parent": _parent_json(row, agent),
        "subtasks": [
            {
                "id": pk,
                "title": title,
                "required_expertise": expertise,
                "status": status,
                "holder": holder,
                "result": _cut(result),
            }
            for _, pk, title, expertise, status, holder, result in subtasks[:SUBTASKS_GIVEN]
        ],
        "subtask_progress": {
            "done": sum(s[4] in FINISHED_STATUSES for s in subtasks),
            "total": len(subtasks),
        },
        "comments": [
            {"author": author, "body": _cut(body), "at": at} for _, author, body, at in comments
        ],
    }


def build(run: Run) -> tuple[str, str, dict]:
    """(system prompt, input, context) of the run, from the organization as it is now."""
    agent = run.agent
    triggers = sql.run_triggers(run.pk)
    order: dict[int, list[str]] = {}
    for task_id, trigger in triggers:
        if task_id is not None:
            order.setdefault(task_id, []).append(trigger)
    ids = list(order)
    names = (*sql.TASK_FIELDS, *sql.TASK_JSON)
    rows = {
        row[0]: dict(zip(names, row, strict=True))
        for row in sql.task_rows(ids, agent.organization_id)
    }
    subtasks, comments = defaultdict(list), defaultdict(list)
    for row in sql.subtask_rows(ids):
        subtasks[row[0]].append(row)
    for row in sql.comment_rows(ids):
        comments[row[0]].append(row)
    context = {
        "run": run.pk,
        "agent": {
            "id": agent.handle,
            "name": agent.name,
            "role": agent.role,
            "expertise": list(agent.expertise),
            "reports": sql.report_handles(agent.pk),
        },
        "tasks": [
            _task_json(rows[pk], agent, kinds, subtasks[pk], comments[pk][:COMMENTS_GIVEN][::-1])
            for pk, kinds in order.items()
            if pk in rows
        ],
    }
    if any(trigger == "decision" for _, trigger in triggers):
        _add_decisions(context["tasks"], agent)
    context = json.loads(json.dumps(context, cls=DjangoJSONEncoder))
    woke = "; ".join(
        f"{WHAT_WOKE.get(trigger, trigger)} (task #{task_id})" for task_id, trigger in triggers
    )
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


# How many of the decisions the agent asked for on a task the input carries (the latest).
DECISIONS_GIVEN = 5


def _add_decisions(tasks: list[dict], agent: Agent) -> None:
    """Each task with the decisions the agent asked for on it, latest first (docs/decisions.md):
    the answer, the verdict and the outcome a `decision` wake-up is about (read only then)."""
    ids = [t["id"] for t in tasks]
    if not ids:
        return
    asked = defaultdict(list)
    rows = HumanDecision.objects.filter(task_id__in=ids, requested_by=agent).select_related(
        "requested_by"
    )
    for decision in rows.order_by("-created_at", "-pk"):
        if len(asked[decision.task_id]) < DECISIONS_GIVEN:
            asked[decision.task_id].append(decision_json(decision))
    for task in tasks:
        if asked.get(task["id"]):
            task["decisions"] = asked[task["id"]]
