"""Tenancy table of the runtime endpoints (contract: tests/tenancy.py)."""

from organization.models import AgentRuntime
from runtime.models import Run, RunTrigger
from tasks.rules import SYSTEM
from tasks.services import task_create
from tests.factories import make_agent
from tests.tenancy import COLLECTION, Endpoint


def a_run(org) -> dict:
    """A finished run of a managed agent on a task (made directly: no worker needed)."""
    agent = make_agent(org, runtime=AgentRuntime.EXTERNAL)
    task = task_create(org=org, actor=SYSTEM, title=f"run task of {org.slug}", assignee=agent)
    run = Run.objects.create(
        organization=org, agent=agent, task=task, trigger="created", status="completed"
    )
    RunTrigger.objects.create(organization=org, agent=agent, run=run, task=task, trigger="created")
    return {"run_id": run.pk, "task_id": task.pk, "agent_id": agent.handle, "title": task.title}


ENDPOINTS = [
    Endpoint("GET", "/api/runs", a_run, kind=COLLECTION),
    Endpoint("GET", "/api/runs?task={task_id}", a_run, kind=COLLECTION),
    Endpoint("GET", "/api/runs?agent={agent_id}", a_run, kind=COLLECTION),
    Endpoint("GET", "/api/runs/{run_id}", a_run),
]
