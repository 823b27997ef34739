"""The API-key lookup on every request (issue 10 §3): one query on the prefix's unique index,
nothing cached across requests, and `GET /api/agents/<id>` in two queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from organization.auth import authenticate_key, key_from_plaintext
from organization.models import ApiKey
from organization.services import api_key_create, api_key_revoke
from tests.conftest import KeyClient
from tests.factories import give_tasks, make_agent, make_org, make_team

pytestmark = pytest.mark.django_db

REFUSED = {
    "success": False,
    "error": "Invalid or revoked API key.",
    "code": "authentication_failed",
}


@pytest.fixture
def acme(db):
    org = make_org("acme")
    team = make_team(org, "Development")
    boss = make_agent(org, "agent-boss", team=team)
    sarah = make_agent(
        org,
        "agent-sarah",
        team=team,
        senior=boss,
        expertise=["React"],
        hierarchy_role="worker",
        system_prompt="Be kind.",
    )
    give_tasks(sarah, 3)
    return org


def sarah_of(org):
    return org.agents.get(handle="agent-sarah")


def used_just_now():
    ApiKey.objects.update(last_used_at=timezone.now())


def test_the_lookup_is_one_query_on_the_unique_prefix_without_a_sort(acme):
    assert ApiKey._meta.get_field("prefix").unique  # its unique index is the one the lookup uses
    _, plaintext = api_key_create(organization=acme, agent=sarah_of(acme))
    with CaptureQueriesContext(connection) as queries:
        key = key_from_plaintext(plaintext)
    assert len(queries) == 1
    sql = queries[0]["sql"]
    assert '"prefix" =' in sql and "ORDER BY" not in sql
    assert "system_prompt" not in sql
    with CaptureQueriesContext(connection) as later:
        # What requests read of the caller comes with the key …
        assert (key.organization.slug, key.agent.handle, key.agent.expertise) == (
            "acme",
            "agent-sarah",
            ["React"],
        )
        assert key.agent.organization_id == key.organization.pk
        assert key.agent.is_paused is False and key.agent.workload_capacity == 5
    assert len(later) == 0
    # … and the rest is loaded when read, as for any deferred field.
    assert key.agent.system_prompt == "Be kind."


def test_an_organization_key_has_no_agent(acme):
    _, plaintext = api_key_create(organization=acme)
    key = key_from_plaintext(plaintext)
    assert key.agent is None and key.organization == acme


def test_a_key_whose_agent_is_in_another_organization_is_refused(acme):
    key, plaintext = api_key_create(organization=acme, agent=sarah_of(acme))
    ApiKey.objects.filter(pk=key.pk).update(organization=make_org("elsewhere"))
    assert authenticate_key(plaintext) is None


def test_a_revoked_key_is_refused_by_the_very_next_request(acme):
    key, plaintext = api_key_create(organization=acme, agent=sarah_of(acme))
    client = KeyClient(plaintext)
    assert client.get("/api/agents/agent-sarah").status_code == 200
    api_key_revoke(key=key)
    response = client.get("/api/agents/agent-sarah")
    assert (response.status_code, response.json()) == (401, REFUSED)


def test_a_key_revoked_by_another_process_is_refused_at_once(acme):
    """A revocation written straight to the table (another worker, the admin) counts too."""
    _, plaintext = api_key_create(organization=acme)
    client = KeyClient(plaintext)
    assert client.get("/api/agents/agent-sarah").status_code == 200
    ApiKey.objects.update(revoked_at=timezone.now())
    response = client.get("/api/agents/agent-sarah")
    assert (response.status_code, response.json()) == (401, REFUSED)


@pytest.mark.parametrize("kind", ["agent", "org"])
def test_get_an_agent_takes_two_queries(acme, kind, django_assert_max_num_queries):
    """The key, and the agent with its workload, team, senior and role."""
    agent = sarah_of(acme) if kind == "agent" else None
    _, plaintext = api_key_create(organization=acme, agent=agent)
    client = KeyClient(plaintext)
    used_just_now()
    with django_assert_max_num_queries(2):
        response = client.get("/api/agents/agent-sarah")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == next(
        a for a in client.get("/api/agents").json()["results"] if a["id"] == body["id"]
    )
    assert (body["team"], body["seniorId"], body["current_workload"], body["status"]) == (
        "Development",
        "agent-boss",
        3,
        "active",
    )
    assert body["hierarchy_role"]["role"] == "worker"


def test_the_use_is_recorded_at_most_once_a_minute(acme, django_assert_num_queries):
    key, plaintext = api_key_create(organization=acme)
    client = KeyClient(plaintext)
    with django_assert_num_queries(3):  # the key, its last use, the agent
        client.get("/api/agents/agent-sarah")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    with django_assert_num_queries(2):
        client.get("/api/agents/agent-sarah")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first
