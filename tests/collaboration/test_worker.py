"""Sessions on a real Celery worker (in this process, on the Redis broker of REDIS_URL)."""

import pytest
from celery.contrib.testing.worker import start_worker

from collaboration.models import CollaborationSession
from config.celery import app
from tests.collaboration.conftest import specialists, wait_for
from tests.fake_llm import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


@pytest.fixture
def worker(settings):
    if settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"
    ):
        yield


def finished(client, session_id):
    def check():
        body = client.get(f"/api/collaborations/{session_id}").json()
        return body if body["status"] not in ("queued", "running", "synthesizing") else None

    return check


def test_a_session_started_over_rest_runs_on_the_worker(acme, offline, worker, org_client):
    client = org_client(acme)
    response = client.post(
        "/api/collaborations",
        {"task": "Choose a cache", "agents": specialists("a", "b", "c"), "synthesis": "vote"},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    body = wait_for(finished(client, response.json()["id"]), timeout=30)
    assert body["status"] == "completed"
    assert body["progress"] == {"done": 3, "total": 3}
    assert [c["status"] for c in body["contributions"]] == ["completed"] * 3
    assert "## Majority Conclusion" in body["result"]
    assert body["events"][-1]["name"] == "tool:collaborative:complete"
    assert body["metadata"]["total_tokens"] == 0  # the offline provider called no model


def test_cancel_stops_a_running_session(acme, fake_llm, worker, org_client):
    fake_llm.on(agent="slow", replies=Reply(hang=True))
    client = org_client(acme)
    session_id = client.post(
        "/api/collaborations",
        {"task": "t", "agents": specialists("slow", "quick"), "agent_timeout": 60},
        format="json",
    ).json()["id"]
    wait_for(lambda: fake_llm.calls_for(agent="slow"), timeout=30)
    response = client.post(f"/api/collaborations/{session_id}/cancel")
    assert response.status_code == 200
    assert response.json()["cancel_requested"] is True
    body = wait_for(finished(client, session_id), timeout=10)
    assert body["status"] == "cancelled"
    slow = next(c for c in body["contributions"] if c["agent"] == "slow")
    assert slow["status"] == "cancelled"
    assert not fake_llm.calls_for(purpose="synthesis")
    assert CollaborationSession.objects.get(pk=session_id).finished_at is not None
