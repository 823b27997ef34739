"""The whole console against an organization of 200 agents and 5,000 tasks (issue 13 §4): every
page — the dashboard, each list, a task, an agent, the org chart, a collaboration — answers in
as many queries as it does for a small organization (django_assert_max_num_queries, one bound
for both), and the org chart reads the agents in one query."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from collaboration.models import CollaborationSession, Contribution, SessionStatus
from costs.models import LIFETIME, Budget, UsageRecord
from organization.models import Agent, AgentRole, Team
from runtime.models import Run, RunStatus
from tasks.models import DeliveryStatus, Task, TaskEvent, TaskStatus, WebhookDelivery
from tests.console.pages import queries_of
from tests.factories import make_org

# No page of the console may need more than this, whatever the organization's size.
CEILING = 40


def populate(slug: str, n_agents: int, n_tasks: int) -> dict:
    """Bulk-created rows of every kind a console page reads (the services are not what this
    test is about): teams, a seniors' tree with paused supervisors, tasks in every status with
    an event each, the ledger, budgets, runs, deliveries and a collaboration."""
    org = make_org(slug)
    teams = Team.objects.bulk_create(Team(organization=org, name=f"Team {i}") for i in range(8))
    agents = Agent.objects.bulk_create(
        Agent(
            organization=org,
            handle=f"agent-{slug}-{i}",
            name=f"A {i}",
            team=teams[i % 8],
            is_paused=i % 20 == 0,
            expertise=["Python", f"E{i % 7}"],
        )
        for i in range(n_agents)
    )
    for i, agent in enumerate(agents[1:], start=1):
        agent.senior = agents[(i - 1) // 4]  # a tree four wide
    Agent.objects.bulk_update(agents, ["senior"])
    AgentRole.objects.bulk_create(
        AgentRole(agent=a, role="supervisor" if i < n_agents // 4 else "worker")
        for i, a in enumerate(agents)
    )
    statuses = list(TaskStatus)
    tasks = Task.objects.bulk_create(
        Task(
            organization=org,
            title=f"Task {i}",
            status=statuses[i % len(statuses)],
            assignee=agents[i % n_agents] if i % 8 in (1, 2, 3) else None,
            queued_for=agents[i % n_agents] if i % 8 == 0 else None,
        )
        for i in range(n_tasks)
    )
    TaskEvent.objects.bulk_create(
        TaskEvent(
            organization=org,
            task=t,
            kind="delegated",
            actor_kind="agent",
            actor_agent=agents[i % n_agents],
            actor_label=agents[i % n_agents].handle,
            recipient=agents[(i + 1) % n_agents],
            decision="DELEGATE",
            reasoning="Same team.",
        )
        for i, t in enumerate(tasks)
    )
    session = CollaborationSession.objects.create(
        organization=org,
        task="Which database?",
        status=SessionStatus.COMPLETED,
        max_parallel=3,
        agent_timeout=60,
        max_total_tokens=10_000,
        result="Postgres.",
    )
    Contribution.objects.bulk_create(
        Contribution(
            session=session,
            position=i,
            agent_key=agents[i].handle,
            status="completed",
            response="Postgres.",
        )
        for i in range(3)
    )
    runs = Run.objects.bulk_create(
        Run(
            organization=org,
            agent=agents[i % n_agents],
            task=tasks[i],
            trigger="assigned",
            status=RunStatus.COMPLETED,
        )
        for i in range(min(n_tasks, 50))
    )
    UsageRecord.objects.bulk_create(
        UsageRecord(
            organization=org,
            agent=agents[i % n_agents],
            task=tasks[i],
            run=runs[i % len(runs)],
            session=session if i % 10 == 0 else None,
            purpose="run",
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal("0.01"),
            price_source="genai-prices",
        )
        for i in range(n_tasks)
    )
    Budget.objects.bulk_create(
        Budget(organization=org, scope="agent", agent=a, limit_usd=1, period=LIFETIME)
        for a in agents[:10]
    )
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            organization=org,
            agent=agents[i % n_agents],
            url="https://hooks.example/x",
            status=DeliveryStatus.FAILED,
        )
        for i in range(n_agents)
    )
    # The busiest pages: a task with events and cost, a supervisor with reports and a queue.
    return {"org": org, "task": tasks[1], "agent": agents[1], "session": session}


def pages(data: dict) -> dict[str, str]:
    org = data["org"]
    only = f"?organization__id__exact={org.pk}"
    lists = {
        name: reverse(f"admin:{name}_changelist") + only
        for name in [
            "tasks_task",
            "tasks_taskevent",
            "tasks_webhookdelivery",
            "organization_agent",
            "organization_team",
            "organization_apikey",
            "runtime_run",
            "collaboration_collaborationsession",
            "costs_usagerecord",
            "costs_budget",
        ]
    }
    return {
        "dashboard": reverse("admin:index") + f"?organization={org.pk}",
        **lists,
        "task": reverse("admin:tasks_task_change", args=[data["task"].pk]),
        "agent": reverse("admin:organization_agent_change", args=[data["agent"].pk]),
        "org_chart": reverse("admin:organization_organization_org_chart", args=[org.pk]),
        "collaboration": reverse(
            "admin:collaboration_collaborationsession_change", args=[data["session"].pk]
        ),
    }


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw")


def test_every_console_page_answers_in_the_same_bound_for_a_small_and_a_big_organization(
    client, root, django_assert_max_num_queries
):
    small, big = populate("small", 8, 40), populate("big", 200, 5_000)
    client.force_login(root)
    client.get(reverse("admin:index"), {"organization": small["org"].pk})  # the session row
    bounds = {}
    for name, url in pages(small).items():
        client.get(url)  # warm: the session's organization choice, caches
        with CaptureQueriesContext(connection) as small_queries:
            response = client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        bounds[name] = len(small_queries)
        assert bounds[name] <= CEILING, (name, bounds[name])
    for name, url in pages(big).items():
        client.get(url)
        with django_assert_max_num_queries(bounds[name]):
            response = client.get(url)
        assert response.status_code == 200, name
    assert big["task"].title in client.get(pages(big)["task"]).content.decode()


def test_the_org_chart_reads_the_agents_in_one_query_for_200_agents(client, root):
    data = populate("big", 200, 500)
    client.force_login(root)
    url = reverse("admin:organization_organization_org_chart", args=[data["org"].pk])
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    # Queries reading agent rows (the organization's own query counts them in a subquery).
    agent_reads = [q["sql"] for q in queries if q["sql"].startswith('SELECT "organization_agent"')]
    assert len(agent_reads) == 1, agent_reads
    assert len(response.context["nodes"]) == 200
    assert sum(len(team.nodes) for team in response.context["teams"]) == 200
    # Paused agents with reports are flagged (every 20th agent is paused; most have reports).
    assert response.context["flagged"]
    assert all(node.agent.is_paused and node.reports for node in response.context["flagged"])


def test_an_organization_page_answers_in_as_many_queries_for_2_and_30_members(
    root_client, db, django_assert_max_num_queries
):
    from tests.factories import make_admin_user

    small, big = make_org("small"), make_org("big")
    for org, n in ((small, 2), (big, 30)):
        for i in range(n):
            make_admin_user(org, username=f"{org.slug}-{i}")
    bound = queries_of(
        root_client, reverse("admin:organization_organization_change", args=[small.pk])
    )
    big_url = reverse("admin:organization_organization_change", args=[big.pk])
    root_client.get(big_url)
    with django_assert_max_num_queries(bound):
        assert root_client.get(big_url).status_code == 200
