"""An agent sets its own `availability_until` (seed 001), over REST and as a tool (issue 8 §6)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from organization.models import Agent
from tasks.models import MAX_WAIT_SECONDS
from tests.conftest import agent_of
from tests.tasks.test_tools import call

pytestmark = pytest.mark.django_db

PATH = "/api/agents/me/availability"


def test_an_agent_sets_and_clears_its_availability(demo, agent_client):
    jordan = agent_of(demo, "agent-jordan")
    client = agent_client(jordan)
    response = client.post(PATH, {"availability_until": "2030-01-02T15:00:00Z"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == "agent-jordan"
    assert parse_datetime(response.json()["availability_until"]) == parse_datetime(
        "2030-01-02T15:00:00Z"
    )
    jordan.refresh_from_db()
    assert jordan.availability_until == parse_datetime("2030-01-02T15:00:00Z")

    cleared = client.post(PATH, {"availability_until": None}, format="json")
    assert cleared.status_code == 200, cleared.content
    assert cleared.json() == {"id": "agent-jordan", "availability_until": None}
    jordan.refresh_from_db()
    assert jordan.availability_until is None


def test_the_roster_shows_it_to_colleagues(demo, agent_client):
    agent_client(agent_of(demo, "agent-jordan")).post(
        PATH, {"availability_until": "2030-01-02T15:00:00Z"}, format="json"
    )
    roster = agent_client(agent_of(demo, "agent-alex")).get("/api/roster").json()
    jordan = next(c for c in roster["colleagues"] if c["id"] == "agent-jordan")
    assert parse_datetime(jordan["availability_until"]) == parse_datetime("2030-01-02T15:00:00Z")


def test_it_is_required_and_must_be_an_iso_time(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-jordan"))
    for body in ({}, {"availability_until": "next tuesday"}):
        response = client.post(PATH, body, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["success"] is False
        assert response.json()["code"] == "invalid"
        assert "availability_until" in response.json()["error"]


def test_an_organization_key_acts_as_no_agent(demo, org_client):
    response = org_client(demo).post(PATH, {"availability_until": None}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "agent_required"


def test_the_tool_sets_it_too(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-jordan"))
    response = call(client, "set_my_availability", availability_until="2030-01-02T15:00:00Z")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == "agent-jordan"
    assert Agent.objects.get(pk=agent_of(demo, "agent-jordan").pk).availability_until == (
        parse_datetime("2030-01-02T15:00:00Z")
    )
    assert call(client, "set_my_availability", availability_until=None).status_code == 200
    assert agent_of(demo, "agent-jordan").availability_until is None

    bad = call(client, "set_my_availability", availability_until="soon")
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid"


def test_the_recommendation_uses_it_in_a_busy_experts_wait(demo, agent_client):
    alex = agent_client(agent_of(demo, "agent-alex"))
    url = "/api/delegation/recommendation?expertise=Kubernetes"
    assert alex.get(url).json()["primary_choice"]["estimated_wait_seconds"] == 720

    free_at = timezone.now() + timedelta(hours=2)
    agent_client(agent_of(demo, "agent-jordan")).post(
        PATH, {"availability_until": free_at.isoformat()}, format="json"
    )
    body = alex.get(url).json()
    jordan = body["candidates"][0]
    assert jordan["id"] == "agent-jordan"
    assert 7190 <= jordan["estimated_wait_seconds"] <= 7200
    assert "by their own estimate" in jordan["reason"]
    assert parse_datetime(jordan["availability_until"]) == free_at
    # Two hours are within the normal urgency's timeline (4 h): still QUEUE, with that wait.
    assert body["decision"] == "QUEUE"
    assert "Wait Time: 7" in body["decision_text"]


def test_a_past_availability_is_ignored_by_the_wait_estimate(demo, agent_client):
    agent_client(agent_of(demo, "agent-jordan")).post(
        PATH, {"availability_until": "2001-01-01T00:00:00Z"}, format="json"
    )
    body = agent_client(agent_of(demo, "agent-alex")).get(
        "/api/delegation/recommendation?expertise=Kubernetes"
    )
    assert body.json()["primary_choice"]["estimated_wait_seconds"] == 720


def test_queueing_for_an_expert_uses_it_in_the_stored_wait(demo, agent_client):
    jordan = agent_of(demo, "agent-jordan")
    free_at = timezone.now() + timedelta(hours=1)
    agent_client(jordan).post(PATH, {"availability_until": free_at.isoformat()}, format="json")
    alex = agent_client(agent_of(demo, "agent-alex"))
    task = alex.post(
        "/api/tasks", {"title": "Helm chart", "agent_id": "agent-alex"}, format="json"
    ).json()
    queued = alex.post(
        f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-jordan"}, format="json"
    )
    assert queued.status_code == 200, queued.content
    assert 3590 <= queued.json()["estimated_wait_seconds"] <= 3600


def test_an_availability_far_ahead_never_overflows_the_stored_wait(demo, agent_client):
    """An expert away until 2100 made every queue to it a 500 (the event's 32-bit column)."""
    jordan = agent_of(demo, "agent-jordan")
    agent_client(jordan).post(PATH, {"availability_until": "2100-01-01T00:00:00Z"}, format="json")
    alex = agent_client(agent_of(demo, "agent-alex"))
    task = alex.post(
        "/api/tasks", {"title": "Helm chart", "agent_id": "agent-alex"}, format="json"
    ).json()
    queued = alex.post(
        f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-jordan"}, format="json"
    )
    assert queued.status_code == 200, queued.content
    assert queued.json()["estimated_wait_seconds"] == MAX_WAIT_SECONDS


def test_a_stated_wait_wider_than_the_column_is_refused(demo, agent_client):
    alex = agent_client(agent_of(demo, "agent-alex"))
    task = alex.post(
        "/api/tasks", {"title": "Helm chart", "agent_id": "agent-alex"}, format="json"
    ).json()
    queued = alex.post(
        f"/api/tasks/{task['id']}/queue",
        {"agent_id": "agent-jordan", "wait_time_seconds": 10**12},
        format="json",
    )
    assert queued.status_code == 400, queued.content
    assert queued.json()["code"] == "invalid"
    by_tool = call(
        alex, "queue_task", task_id=task["id"], agent_id="agent-jordan", wait_time_seconds=10**12
    )
    assert by_tool.status_code == 400
    assert by_tool.json()["code"] == "invalid"
