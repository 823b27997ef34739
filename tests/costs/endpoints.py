"""Tenancy table of the cost endpoints (contract: tests/tenancy.py)."""

from costs.budgets import budget_set
from costs.metering import settle
from organization.caller import caller_for_member
from tasks.models import Task
from tests.factories import make_admin_user, make_agent, make_team
from tests.tenancy import COLLECTION, Endpoint

from .conftest import hold


def spending(org) -> dict:
    """A team with a budget and an agent whose call is in the ledger."""
    team = make_team(org, f"Spenders of {org.slug}")
    agent = make_agent(org, f"agent-spender-{org.slug}", team=team)
    task = Task.objects.create(
        organization=org, title=f"costly task of {org.slug}", assignee=agent, status="assigned"
    )
    caller = caller_for_member(make_admin_user(org), org)
    budget_set(caller=caller, scope="team", team=team.name, limit_usd="100")
    ticket = hold(agent, prompt_bound=100, max_tokens=100, model="gpt-4o-mini", task_id=task.pk)
    settle(ticket, prompt_tokens=10, completion_tokens=10)
    return {"agent_id": agent.handle, "team": team.name, "task_id": task.pk}


USAGE = {"provider": "openai", "model": "gpt-4o-mini", "prompt_tokens": 1, "completion_tokens": 1}
ESTIMATE = {"task": "t", "agents": [{"agent_id": "{agent_id}", "focus": "f"}]}

ENDPOINTS = [
    Endpoint("GET", "/api/usage", spending, kind=COLLECTION),
    # Another organization's task named in a report: 404 (an organization key: 403 first).
    Endpoint(
        "POST", "/api/usage", spending, body={**USAGE, "task": "{task_id}"}, callers=("agent",)
    ),
    Endpoint("GET", "/api/costs?group_by=agent", spending, kind=COLLECTION),
    Endpoint("GET", "/api/costs?group_by=team", spending, kind=COLLECTION),
    Endpoint("GET", "/api/budgets", spending, kind=COLLECTION),
    # Another organization's team or agent: 404, never a budget on it.
    Endpoint(
        "POST",
        "/api/budgets",
        spending,
        body={"scope": "team", "team": "{team}", "monthly_limit_usd": "1"},
        callers=("org",),
    ),
    Endpoint("GET", "/api/budgets/alerts", spending, kind=COLLECTION, callers=("org",)),
    # Another organization's agent in the body: 404 agent_not_found, nothing estimated.
    Endpoint("POST", "/api/collaborations/estimate", spending, body=ESTIMATE),
]
