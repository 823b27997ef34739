"""COLLAB_MAX_STARTS_PER_HOUR: starts per organization in any hour, at every door."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from collaboration.models import CollaborationSession
from collaboration.services import session_create
from infrastructure.errors import DomainError
from organization.mcp_server.tools import _run_tool
from tests.collaboration.conftest import human, specialists
from tests.conftest import agent_of
from tests.factories import make_org

pytestmark = pytest.mark.django_db

BODY = {"task": "Review the payment API", "agents": specialists("a", "b")}


@pytest.fixture
def limit_2(settings):
    settings.COLLAB_MAX_STARTS_PER_HOUR = 2


def test_a_start_above_the_hourly_limit_is_429_rate_limited(acme, org_client, limit_2):
    client = org_client(acme)
    for _ in range(2):
        assert client.post("/api/collaborations", BODY, format="json").status_code == 202
    refused = client.post("/api/collaborations", BODY, format="json")
    assert refused.status_code == 429
    body = refused.json()
    assert body == {"success": False, "code": "rate_limited", "error": body["error"]}
    assert body["error"].startswith("This organization started 2 collaborations in the last hour")
    assert 3590 <= int(refused["Retry-After"]) <= 3600
    assert CollaborationSession.objects.count() == 2


def test_the_limit_counts_per_organization(acme, org_client, limit_2):
    other = make_org("globex")
    for _ in range(2):
        session_create(caller=human(acme), payload=BODY)
    response = org_client(other).post("/api/collaborations", BODY, format="json")
    assert response.status_code == 202


def test_starts_older_than_an_hour_no_longer_count(acme, org_client, limit_2):
    first, second = (session_create(caller=human(acme), payload=BODY) for _ in range(2))
    now = timezone.now()
    CollaborationSession.objects.filter(pk=first.pk).update(created_at=now - timedelta(minutes=59))
    CollaborationSession.objects.filter(pk=second.pk).update(created_at=now - timedelta(minutes=30))
    refused = org_client(acme).post("/api/collaborations", BODY, format="json")
    assert refused.status_code == 429
    # A place frees when the 59-minute-old start leaves the hour.
    assert 55 <= int(refused["Retry-After"]) <= 61
    CollaborationSession.objects.filter(pk=first.pk).update(created_at=now - timedelta(minutes=61))
    assert org_client(acme).post("/api/collaborations", BODY, format="json").status_code == 202


@pytest.mark.django_db(transaction=True)  # the MCP door closes its connection after a call
def test_the_tool_door_and_mcp_answer_the_same_code(acme, agent_client, limit_2):
    for _ in range(2):
        session_create(caller=human(acme), payload=BODY)
    sarah = agent_of(acme, "agent-sarah")
    tool = agent_client(sarah).post(
        "/api/agent-engine/call-tool",
        {"toolName": "start_collaboration", "params": BODY},
        format="json",
    )
    assert tool.status_code == 429
    assert tool.json()["code"] == "rate_limited"
    assert int(tool["Retry-After"]) >= 1
    from organization.caller import Caller

    result = _run_tool(Caller(organization=acme, agent=sarah), "start_collaboration", BODY)
    assert result.is_error is True
    mcp = json.loads(result.content[0].text)
    assert (mcp["success"], mcp["code"], mcp["status"]) == (False, "rate_limited", 429)
    assert CollaborationSession.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_never_pass_the_limit(acme, settings):
    """Ten starts at once with room for three: the organization's row lock lets three in."""
    settings.COLLAB_MAX_STARTS_PER_HOUR = 3
    caller = human(acme)
    barrier = threading.Barrier(10)
    outcomes = []

    def start():
        try:
            barrier.wait(timeout=10)
            session_create(caller=caller, payload=BODY)
            outcomes.append("started")
        except DomainError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["rate_limited"] * 7 + ["started"] * 3
    assert CollaborationSession.objects.filter(organization=acme).count() == 3
