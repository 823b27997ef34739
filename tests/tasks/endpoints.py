"""Tenancy table of the task endpoints (contract: tests/tenancy.py)."""

from organization.models import AgentRole
from tasks.models import HumanDecision, InboxItem, PolicyTrigger, TaskEvent
from tasks.rules import SYSTEM
from tasks.services import policy_create, task_create
from tests.factories import give_tasks, make_agent
from tests.tenancy import COLLECTION, Endpoint


def a_task(org) -> dict:
    """A task held by an agent, plus a second agent (a target for moves)."""
    holder = make_agent(org, expertise=["Tenancy"])
    other = make_agent(org, expertise=["Tenancy"])
    task = task_create(org=org, actor=SYSTEM, title=f"task of {org.slug}", assignee=holder)
    return {
        "task_id": task.pk,
        "title": task.title,
        "agent_id": other.handle,
        "holder": holder.handle,
    }


def an_inbox_item(org) -> dict:
    kwargs = a_task(org)
    task_id = kwargs["task_id"]
    event = TaskEvent.objects.filter(task_id=task_id).first()
    item = InboxItem.objects.filter(event=event).first()
    return {**kwargs, "item_id": item.pk}


def an_agent(org) -> dict:
    agent = make_agent(org, expertise=["Tenancy"])
    AgentRole.objects.create(agent=agent, role="worker")
    give_tasks(agent, 1)
    return {"agent_id": agent.handle}


def a_decision(org) -> dict:
    """A pending question about a task an agent holds, and an approval policy."""
    kwargs = a_task(org)
    decision = HumanDecision.objects.create(
        organization=org,
        kind="question",
        task_id=kwargs["task_id"],
        question=f"question of {org.slug}",
        requester_label=kwargs["holder"],
    )
    policy = policy_create(
        org=org, name=f"policy of {org.slug}", trigger=PolicyTrigger.CROSS_TEAM_DELEGATION
    )
    return {**kwargs, "decision_id": decision.pk, "policy_id": policy.pk}


DECISION_VERBS = ["approve", "reject", "request_changes", "answer"]

ENDPOINTS = [
    # Decisions (docs/decisions.md): a human decides (an agent key is refused before the lookup).
    Endpoint("GET", "/api/approval-policies", a_decision, kind=COLLECTION, callers=("org",)),
    Endpoint(
        "POST",
        "/api/approval-policies",
        a_decision,
        body={
            "name": "x",
            "trigger": "cross_team_delegation",
            "scope": "agent",
            "agent": "{holder}",
        },
        callers=("org",),
    ),
    *[
        Endpoint(
            method, "/api/approval-policies/{policy_id}", a_decision, body=body, callers=("org",)
        )
        for method, body in [("GET", None), ("PATCH", {"enabled": False}), ("DELETE", None)]
    ],
    Endpoint("GET", "/api/decisions", a_decision, kind=COLLECTION),
    Endpoint("GET", "/api/decisions/{decision_id}", a_decision),
    Endpoint(
        "POST",
        "/api/decisions",
        a_decision,
        body={"task": "{task_id}", "question": "?"},
        callers=("agent",),
    ),
    *[
        Endpoint(
            "POST",
            f"/api/decisions/{{decision_id}}/{verb}",
            a_decision,
            body={"answer": "x"},
            callers=("org",),
        )
        for verb in DECISION_VERBS
    ],
    Endpoint("POST", "/api/decisions/{decision_id}/cancel", a_decision, body={}),
    Endpoint(
        "POST",
        "/api/agent-engine/call-tool",
        a_decision,
        body={"toolName": "get_decision", "params": {"decision_id": "{decision_id}"}},
    ),
    Endpoint("GET", "/api/tasks", a_task, kind=COLLECTION),
    Endpoint("GET", "/api/tasks?status=assigned", a_task, kind=COLLECTION),
    Endpoint("POST", "/api/tasks", a_task, body={"title": "x", "agent_id": "{agent_id}"}),
    Endpoint("GET", "/api/tasks/{task_id}", a_task),
    Endpoint("POST", "/api/tasks/{task_id}/assign", a_task, body={"agent_id": "{agent_id}"}),
    Endpoint("POST", "/api/tasks/{task_id}/delegate", a_task, body={"agent_id": "{agent_id}"}),
    Endpoint("POST", "/api/tasks/{task_id}/queue", a_task, body={"agent_id": "{agent_id}"}),
    Endpoint("POST", "/api/tasks/{task_id}/escalate", a_task, body={"reason": "r"}),
    Endpoint("POST", "/api/tasks/{task_id}/status", a_task, body={"status": "in_progress"}),
    Endpoint("POST", "/api/tasks/{task_id}/cancel", a_task, body={"reason": "r"}),
    Endpoint("GET", "/api/tasks/{task_id}/events", a_task),
    Endpoint("GET", "/api/tasks/{task_id}/comments", a_task),
    Endpoint("POST", "/api/tasks/{task_id}/comments", a_task, body={"body": "hello"}),
    # A parent of another organization is 404, as the task itself would be.
    Endpoint("POST", "/api/tasks", a_task, body={"title": "x", "parent": "{task_id}"}),
    Endpoint("GET", "/api/tasks?parent={task_id}", a_task, kind=COLLECTION),
    Endpoint("GET", "/api/inbox", an_inbox_item, kind=COLLECTION, callers=("agent",)),
    Endpoint(
        "POST", "/api/inbox/read", an_inbox_item, body={}, kind=COLLECTION, callers=("agent",)
    ),
    Endpoint("POST", "/api/inbox/{item_id}/read", an_inbox_item, callers=("agent",)),
    Endpoint("GET", "/api/delegation/recommendation?expertise=Tenancy", an_agent, kind=COLLECTION),
    Endpoint(
        "GET",
        "/api/delegation/recommendation?expertise=Tenancy&agent={agent_id}",
        an_agent,
        callers=("org",),
    ),
    Endpoint(
        "POST",
        "/api/agent-engine/call-tool",
        a_task,
        body={"toolName": "get_my_tasks", "params": {}},
        kind=COLLECTION,
    ),
    Endpoint(
        "POST",
        "/api/agent-engine/call-tool",
        a_task,
        body={"toolName": "assign_task", "params": {"task_id": "{task_id}"}},
        callers=("agent",),
    ),
    # Issue 11 §1's tools: another organization's task (or parent) is 404 at the tool door too.
    *[
        Endpoint(
            "POST",
            "/api/agent-engine/call-tool",
            a_task,
            body={"toolName": name, "params": params},
            callers=callers,
        )
        for name, params, callers in [
            ("get_task", {"task_id": "{task_id}"}, ("agent", "org")),
            ("list_task_comments", {"task_id": "{task_id}"}, ("agent", "org")),
            ("comment_on_task", {"task_id": "{task_id}", "body": "hi"}, ("agent",)),
            ("complete_task", {"task_id": "{task_id}", "result": "done"}, ("agent",)),
            ("create_subtask", {"title": "x", "parent": "{task_id}"}, ("agent",)),
        ]
    ],
]
