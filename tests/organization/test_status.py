"""Status relative to capacity (issue 8 §6): one rule in Python and in SQL, and what uses it."""

import pytest

from organization.models import Agent
from organization.selectors import agents_with_workload
from organization.workload import status_expression, status_for, with_status
from tasks.models import Task, TaskStatus
from tests.conftest import requires_postgres
from tests.factories import give_tasks, make_agent, make_org

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "workload, status",
    [(0, "idle"), (1, "idle"), (2, "idle"), (3, "active"), (4, "busy"), (5, "busy"), (7, "busy")],
)
def test_capacity_5_is_exactly_seed_000s_table(workload, status):
    assert status_for(is_paused=False, workload=workload, capacity=5) == status


@pytest.mark.parametrize(
    "workload, capacity, status",
    [
        (3, 3, "busy"),  # the case: full, so neither active nor available
        (2, 3, "active"),
        (1, 3, "idle"),
        (0, 0, "busy"),  # no room at all
        (0, 1, "idle"),
        (1, 1, "busy"),
        (4, 10, "idle"),
        (7, 10, "active"),
        (8, 10, "busy"),
    ],
)
def test_status_is_relative_to_capacity(workload, capacity, status):
    assert status_for(is_paused=False, workload=workload, capacity=capacity) == status


def test_an_agent_without_room_is_never_idle_or_active():
    for capacity in range(0, 30):
        for workload in range(capacity, capacity + 3):
            assert status_for(is_paused=False, workload=workload, capacity=capacity) == "busy"


def test_paused_is_offline_whatever_the_workload():
    assert status_for(is_paused=True, workload=0, capacity=5) == "offline"


@requires_postgres()
def test_python_and_sql_status_agree_for_many_workloads_and_capacities():
    org = make_org()
    expected, tasks = {}, []
    for capacity in range(0, 13):
        for workload in range(0, capacity + 3):
            for paused in (False, True) if workload in (0, capacity) else (False,):
                agent = make_agent(org, workload_capacity=capacity, is_paused=paused)
                expected[agent.handle] = status_for(
                    is_paused=paused, workload=workload, capacity=capacity
                )
                tasks += [
                    Task(organization=org, title="t", status=TaskStatus.IN_PROGRESS, assignee=agent)
                    for _ in range(workload)
                ]
    # Tasks that do not count towards the workload must not change the SQL status either.
    some = Agent.objects.filter(organization=org).first()
    tasks += [Task(organization=org, title="done", status=TaskStatus.COMPLETED, assignee=some)]
    Task.objects.bulk_create(tasks)
    assert len(expected) > 120

    rows = agents_with_workload(org=org).annotate(sql_status=status_expression())
    assert {a.handle: a.sql_status for a in rows} == expected
    for status in ("idle", "active", "busy", "offline"):
        found = {a.handle for a in with_status(agents_with_workload(org=org), status)}
        assert found == {h for h, s in expected.items() if s == status}, status
    available = {a.handle for a in with_status(agents_with_workload(org=org), "available")}
    assert available == {h for h, s in expected.items() if s in ("idle", "active")}


def test_a_full_agent_with_capacity_3_is_busy_and_not_available_anywhere(org_client, agent_client):
    org = make_org()
    full = make_agent(org, "agent-full", workload_capacity=3)
    give_tasks(full, 3)
    asker = make_agent(org, "agent-asker")
    client = org_client(org)

    agent = client.get("/api/agents/agent-full").json()
    assert (agent["status"], agent["current_workload"], agent["workload_capacity"]) == (
        "busy",
        3,
        3,
    )
    roster = agent_client(asker).get("/api/roster?filter=available").json()
    assert "agent-full" not in [c["id"] for c in roster["colleagues"]]
    everyone = agent_client(asker).get("/api/roster").json()["colleagues"]
    assert next(c for c in everyone if c["id"] == "agent-full")["status"] == "busy"
    assert [a["id"] for a in client.get("/api/agents?status=active").json()["results"]] == []
    busy = client.get("/api/agents?status=busy").json()["results"]
    assert [a["id"] for a in busy] == ["agent-full"]


def test_agents_status_available_means_idle_or_active(demo, org_client):
    response = org_client(demo).get("/api/agents", {"status": "available"})
    assert response.status_code == 200, response.content
    found = [a["id"] for a in response.json()["results"]]
    # Demo: Alex 1/5 idle, Sarah and Taylor 3/5 active; Alice, Jordan, Morgan busy; Sam offline.
    assert found == ["agent-alex", "agent-sarah", "agent-taylor"]
    assert {a["status"] for a in response.json()["results"]} == {"idle", "active"}


def test_agents_status_available_combines_with_expertise(demo, org_client):
    response = org_client(demo).get(
        "/api/agents", {"status": "available", "expertise": "PostgreSQL"}
    )
    assert [a["id"] for a in response.json()["results"]] == ["agent-alex"]


def test_agents_status_rejects_an_unknown_status(demo, org_client):
    response = org_client(demo).get("/api/agents", {"status": "sleepy"})
    assert response.status_code == 400
    assert response.json()["success"] is False
