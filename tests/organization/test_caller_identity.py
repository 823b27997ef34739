"""docs/design.md: the caller's identity comes from the key; a body that names a different agent than
the key → 403 `identity_mismatch` — on every door that acts as the key's agent, not only on
call-tool and the task moves. (The roster's `agent` parameter is no identity: an agent key naming
another gets its own roster, tests/organization/test_roster.py.)"""

import pytest

from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org

pytestmark = pytest.mark.django_db

DOORS = [
    ("/api/agents/me/availability", {"availability_until": None}),
    ("/api/agents/me/status", {"status": "pending"}),
    ("/api/inbox/read", {}),
]


@pytest.fixture
def alpha():
    org = make_org("alpha")
    return org, make_agent(org, "agent-a"), make_agent(org, "agent-b")


@pytest.mark.parametrize("path, body", DOORS)
def test_a_body_naming_another_agent_is_refused(alpha, path, body):
    org, a, _ = alpha
    client = KeyClient(make_key(org, a))
    refused = client.post(path, {**body, "agentId": "agent-b"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "identity_mismatch"
    assert client.post(path, {**body, "agentId": "agent-a"}, format="json").status_code == 200


def test_a_refused_body_changes_nothing(alpha):
    """Refused before the service runs: the availability is not set, no inbox item is read."""
    from tasks.models import InboxItem
    from tasks.rules import SYSTEM
    from tasks.services import task_create

    org, a, _ = alpha
    task_create(org=org, actor=SYSTEM, title="t", assignee=a)  # an unread `created` item for a
    client = KeyClient(make_key(org, a))
    until = {"availability_until": "2031-01-01T00:00:00Z", "agentId": "agent-b"}
    assert client.post("/api/agents/me/availability", until, format="json").status_code == 403
    assert client.post("/api/inbox/read", {"agentId": "agent-b"}, format="json").status_code == 403
    a.refresh_from_db()
    assert a.availability_until is None
    assert InboxItem.objects.filter(agent=a, read_at__isnull=True).count() == 1
