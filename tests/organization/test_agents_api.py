"""`GET /api/agents`, `GET /api/agents/<id>`, `GET /api/teams`: paginated, filtered, constant queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import agent_of
from tests.factories import give_tasks, make_agent, make_team

pytestmark = pytest.mark.django_db


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [a["id"] for a in response.json()["results"]]


def test_it_lists_the_organizations_agents_with_roster_fields_team_and_role(demo, agent_client):
    response = agent_client(agent_of(demo, "agent-sarah")).get("/api/agents")
    body = response.json()
    assert body["count"] == 7
    sarah = next(a for a in body["results"] if a["id"] == "agent-sarah")
    assert sarah == {
        "id": "agent-sarah",
        "name": "Sarah",
        "role": "Frontend Developer",
        "team": "Development",
        "team_id": agent_of(demo, "agent-sarah").team_id,
        "seniorId": "agent-alice",
        "expertise": ["React", "TypeScript", "CSS"],
        "status": "active",
        "current_workload": 3,
        "workload_capacity": 5,
        "availability_until": None,
        "paused": False,
        "hierarchy_role": {
            "role": "worker",
            "can_assign_to_peers": False,
            "can_escalate_to_supervisor": True,
        },
        "runtime": "external",
    }


def test_it_is_paginated_by_limit_and_offset(demo, org_client):
    client = org_client(demo)
    first = client.get("/api/agents", {"limit": 3})
    assert ids(first) == ["agent-alex", "agent-alice", "agent-database-lead"]
    assert first.json()["next"] is not None
    assert ids(client.get("/api/agents", {"limit": 3, "offset": 6})) == ["agent-taylor"]


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"team": "Development"}, ["agent-alex", "agent-sarah"]),
        ({"status": "busy"}, ["agent-alice", "agent-database-lead", "agent-jordan"]),
        ({"status": "active"}, ["agent-sarah", "agent-taylor"]),
        ({"status": "idle"}, ["agent-alex"]),
        ({"status": "offline"}, ["agent-sam"]),
        ({"expertise": "PostgreSQL"}, ["agent-alex", "agent-database-lead"]),
        ({"expertise": "postgresql"}, []),
        ({"hierarchy_role": "supervisor"}, ["agent-alice", "agent-sam"]),
        ({"hierarchy_role": "specialist"}, ["agent-database-lead"]),
        ({"hierarchy_role": "none"}, []),
        ({"team": "Infrastructure", "status": "busy"}, ["agent-database-lead", "agent-jordan"]),
        ({"runtime": "managed"}, []),
        ({"runtime": "external", "team": "Design"}, ["agent-taylor"]),
    ],
)
def test_filters(demo, org_client, params, expected):
    assert ids(org_client(demo).get("/api/agents", params)) == expected


def test_an_agent_without_role_is_found_by_hierarchy_role_none(demo, org_client):
    make_agent(demo, "agent-newcomer")
    assert ids(org_client(demo).get("/api/agents", {"hierarchy_role": "none"})) == [
        "agent-newcomer"
    ]


def test_an_unknown_status_is_400(demo, org_client):
    response = org_client(demo).get("/api/agents", {"status": "asleep"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert "status" in response.json()["error"]


def test_one_agent_by_its_id(demo, agent_client):
    response = agent_client(agent_of(demo, "agent-sarah")).get("/api/agents/agent-jordan")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["seniorId"], body["status"]) == ("agent-jordan", "agent-sam", "busy")


def test_an_unknown_agent_is_404(demo, org_client):
    response = org_client(demo).get("/api/agents/agent-nobody")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"


def test_teams_are_listed_with_their_size(demo, agent_client):
    response = agent_client(agent_of(demo, "agent-sarah")).get("/api/teams")
    assert response.status_code == 200
    teams = {t["name"]: t["agent_count"] for t in response.json()["results"]}
    assert teams == {"Design": 1, "Development": 2, "Infrastructure": 3, "Leadership": 1}


def count_queries(client, url, params=None) -> int:
    client.get(url, params)  # warm up: the first call records the key's last use
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, params).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    "url, params",
    [
        ("/api/agents", None),
        ("/api/agents", {"status": "busy", "expertise": "AWS"}),
        ("/api/teams", None),
        ("/api/agents/agent-jordan", None),
    ],
)
def test_the_number_of_queries_does_not_grow_with_the_organization(demo, org_client, url, params):
    client = org_client(demo)
    small = count_queries(client, url, params)
    for _ in range(40):
        team = make_team(demo)
        agent = make_agent(
            demo,
            team=team,
            senior=agent_of(demo, "agent-sam"),
            expertise=["AWS"],
            hierarchy_role="worker",
        )
        give_tasks(agent, 4)
    assert count_queries(client, url, params) == small
    assert small <= 4


def test_one_agent_reads_exactly_as_the_list_serializes_it(demo, org_client):
    """`GET /api/agents/<id>` is one precompiled query without the serializer
    (infrastructure/prepared.py): every agent of the demo, and one with a date, no team, no senior
    and no role, reads field for field as AgentSerializer renders it in the list."""
    from datetime import UTC, datetime

    make_agent(
        demo,
        "agent-loner",
        expertise=[],
        workload_capacity=0,
        availability_until=datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    )
    client = org_client(demo)
    listed = client.get("/api/agents", {"limit": 100}).json()["results"]
    assert len(listed) == 8
    for agent in listed:
        one = client.get(f"/api/agents/{agent['id']}")
        assert one.status_code == 200
        assert one.json() == agent
    assert client.get("/api/agents/agent-loner").json()["availability_until"] == (
        "2031-05-06T07:08:09.123456Z"
    )


def test_one_agent_is_two_queries_and_another_organizations_is_404(
    demo, org_client, django_assert_num_queries
):
    from tests.factories import make_org

    client = org_client(demo)
    client.get("/api/agents/agent-sarah")  # the key's last use is recorded once a minute
    with django_assert_num_queries(2):  # the key, the agent
        assert client.get("/api/agents/agent-sarah").status_code == 200
    other = make_org("elsewhere")
    make_agent(other, "agent-stranger")
    response = client.get("/api/agents/agent-stranger")
    assert response.status_code == 404
    assert response.json()["code"] == "agent_not_found"
