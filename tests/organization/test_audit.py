"""Who changed what (issue 13 §3): the historical rows, `GET /api/audit` and the history pages."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from organization.caller import caller_for_key
from organization.history import AUDITED, ActorKind, acting_as
from organization.models import Agent, AgentRole, ApiKey, ExpertiseGroup, TeamRule
from organization.services import agent_set_paused, api_key_create
from tests.conftest import KeyClient
from tests.factories import make_admin_user, make_agent, make_key, make_org
from tests.organization.test_admin import change_url, form_of

pytestmark = pytest.mark.django_db

AUDIT = "/api/audit"


@pytest.fixture
def org(db):
    return make_org("acme")


@pytest.fixture
def alice(org):
    return make_agent(org, "agent-alice", name="Alice", expertise=["Go"])


@pytest.fixture
def org_key(org):
    """An organization key named "test" (tests.factories.make_key) and its prefix."""
    plaintext = make_key(org)
    return KeyClient(plaintext), plaintext.split("_")[1]


@pytest.fixture
def auditor(org_key):
    return org_key[0]


@pytest.fixture
def rival(db):
    org = make_org("rival")
    zed = make_agent(org, "agent-zed", name="Zed")
    AgentRole.objects.create(agent=zed, role="supervisor")
    ExpertiseGroup.objects.create(organization=org, name="Rival", expertise=["Cobol"])
    api_key_create(organization=org, name="rival key")
    return org


def entries(client, **params) -> list[dict]:
    response = client.get(AUDIT, {"limit": 1000, **params})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def last_of(client, model: str, **params) -> dict:
    return [e for e in entries(client, **params) if e["model"] == model][-1]


# --- what is recorded, and who -------------------------------------------------------------


def test_every_audited_model_is_registered():
    assert set(AUDITED) >= {"agent", "agent_role", "team_rule", "expertise_group", "api_key"}


def test_an_admin_change_is_recorded_with_the_user_and_the_values(client, org, alice, auditor):
    bob = make_admin_user(org, username="bob")
    client.force_login(bob)
    url = change_url(alice)
    data = form_of(client, url, "agent_form")
    data["name"] = "Alice Liddell"
    data["expertise"] = "Go\nRust"
    response = client.post(url, data)
    assert response.status_code == 302, response.context["errors"]

    row = Agent.history.filter(id=alice.pk).latest("history_id")
    assert row.history_user == bob
    assert (row.history_actor_kind, row.history_actor_label) == ("user", "bob")
    entry = last_of(auditor, "agent")
    assert entry["action"] == "changed"
    assert entry["object_id"] == str(alice.pk)
    assert entry["object_label"] == "Alice Liddell (agent-alice)"
    assert entry["who"] == {"kind": "user", "label": "bob", "key_prefix": None}
    assert entry["changes"] == [
        # In the model's order of fields.
        {"field": "name", "before": "Alice", "after": "Alice Liddell"},
        {"field": "expertise", "before": ["Go"], "after": ["Go", "Rust"]},
    ]


def test_an_agents_creation_lists_the_values_it_was_given(org, alice, auditor):
    entry = last_of(auditor, "agent")
    assert (entry["action"], entry["who"]["kind"]) == ("created", "system")
    changes = {c["field"]: (c["before"], c["after"]) for c in entry["changes"]}
    assert changes["handle"] == (None, "agent-alice")
    assert changes["expertise"] == (None, ["Go"])
    assert "organization" not in changes and "updated_at" not in changes


def test_a_role_set_through_the_api_is_recorded_with_the_organization_key(alice, org_key):
    auditor, prefix = org_key
    response = auditor.post(
        "/api/team/roles", {"agent_id": "agent-alice", "role": "worker"}, format="json"
    )
    assert response.status_code == 201
    response = auditor.post(
        "/api/team/roles",
        {"agent_id": "agent-alice", "role": "supervisor", "can_assign_to_peers": True},
        format="json",
    )
    assert response.status_code == 201

    created, changed = [e for e in entries(auditor) if e["model"] == "agent_role"]
    assert created["action"] == "created"
    assert {"field": "agent", "before": None, "after": "agent-alice"} in created["changes"]
    assert changed["action"] == "changed"
    assert changed["object_label"] == "agent-alice: supervisor"
    assert changed["who"] == {"kind": "organization_key", "label": "test", "key_prefix": prefix}
    assert changed["changes"] == [
        {"field": "role", "before": "worker", "after": "supervisor"},
        {"field": "can_assign_to_peers", "before": False, "after": True},
    ]
    row = AgentRole.history.latest("history_id")
    assert row.history_user is None  # a key is not a user


def test_a_role_deleted_and_rules_changed_through_the_api(alice, auditor):
    assert (
        auditor.post(
            "/api/team/roles", {"agent_id": "agent-alice", "role": "supervisor"}, format="json"
        ).status_code
        == 201
    )
    response = auditor.post(
        "/api/team/rules",
        {"default_supervisor_agent_id": "agent-alice", "allow_peer_assignment": True},
        format="json",
    )
    assert response.status_code == 201
    assert auditor.post("/api/team/roles/agent-alice/delete").status_code == 200

    found = [(e["model"], e["action"]) for e in entries(auditor)]
    assert found[-4:] == [
        ("agent_role", "created"),
        ("team_rule", "created"),
        ("agent_role", "deleted"),
        # Losing the supervisor role clears the rule's default supervisor (a QuerySet.update).
        ("team_rule", "changed"),
    ]
    cleared = entries(auditor)[-1]
    assert cleared["changes"] == [
        {"field": "default_supervisor", "before": "agent-alice", "after": None}
    ]
    assert cleared["who"]["kind"] == "organization_key"
    deleted = [e for e in entries(auditor) if e["action"] == "deleted"][0]
    assert {"field": "role", "before": "supervisor", "after": None} in deleted["changes"]


def test_an_agent_setting_its_availability_is_recorded_with_its_key(
    org, alice, agent_client, auditor
):
    client = agent_client(alice)
    until = "2031-05-01T12:00:00Z"
    response = client.post(
        "/api/agents/me/availability", {"availability_until": until}, format="json"
    )
    assert response.status_code == 200
    entry = last_of(auditor, "agent")
    assert entry["action"] == "changed"
    assert entry["who"]["kind"] == "agent" and entry["who"]["label"] == "agent-alice"
    prefix = ApiKey.objects.get(agent=alice).prefix
    assert entry["who"]["key_prefix"] == prefix
    [change] = entry["changes"]
    assert change["field"] == "availability_until" and change["before"] is None
    assert change["after"].startswith("2031-05-01T12:00:00")

    # Through the tool registry (REST call-tool, MCP) too.
    response = client.post(
        "/api/agent-engine/call-tool",
        {"toolName": "set_my_availability", "params": {"availability_until": None}},
        format="json",
    )
    assert response.status_code == 200, response.content
    entry = last_of(auditor, "agent")
    assert entry["who"]["label"] == "agent-alice"
    assert entry["changes"][0]["after"] is None


def test_acting_as_a_caller_outside_a_request_records_its_key(org, alice):
    api_key_create(organization=org, agent=alice, name="laptop")
    key = ApiKey.objects.get(agent=alice)
    with acting_as(caller_for_key(key)):
        alice.name = "Al"
        alice.save()
    row = Agent.history.latest("history_id")
    assert (row.history_actor_kind, row.history_actor_label) == (ActorKind.AGENT, "agent-alice")
    assert row.history_actor_key_prefix == key.prefix


def test_pausing_from_the_admin_action_is_recorded(client, org, alice, auditor):
    bob = make_admin_user(org, username="bob")
    client.force_login(bob)
    response = client.post(
        reverse("admin:organization_agent_changelist"),
        {"action": "pause_agents", "_selected_action": [alice.pk]},
    )
    assert response.status_code == 302
    entry = last_of(auditor, "agent")
    assert entry["who"] == {"kind": "user", "label": "bob", "key_prefix": None}
    assert entry["changes"] == [{"field": "is_paused", "before": False, "after": True}]
    # Unchanged agents write nothing.
    count = Agent.history.count()
    agent_set_paused(agents=Agent.objects.filter(pk=alice.pk), paused=True)
    assert Agent.history.count() == count


def test_api_keys_created_and_revoked_without_their_digest(client, org, alice, org_key):
    auditor, _ = org_key
    bob = make_admin_user(org, username="bob")
    client.force_login(bob)
    response = client.post(
        reverse("admin:organization_apikey_add"),
        {"organization": org.pk, "agent": alice.pk, "name": "alice laptop"},
    )
    assert response.status_code == 302
    key = ApiKey.objects.get(name="alice laptop")
    response = client.post(
        reverse("admin:organization_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302

    response = auditor.get(AUDIT, {"limit": 1000})
    body = response.content.decode()
    assert key.digest not in body and "digest" not in body
    assert "last_used_at" not in body
    mine = [e for e in response.json()["results"] if e["object_id"] == str(key.pk)]
    assert [e["action"] for e in mine] == ["created", "revoked"]
    assert mine[0]["who"]["label"] == "bob"
    assert {"field": "prefix", "before": None, "after": key.prefix} in mine[0]["changes"]
    assert [c["field"] for c in mine[1]["changes"]] == ["revoked_at"]
    assert not any(f.name == "digest" for f in ApiKey.history.model._meta.fields)


# --- the feed: since, pages, who may read it, tenancy ---------------------------------------


def test_since_keeps_the_changes_at_or_after_it(org, alice, auditor):
    for model in AUDITED.values():
        model.objects.update(history_date=timezone.now() - timedelta(days=2))
    ExpertiseGroup.objects.create(organization=org, name="Data", expertise=["SQL"])
    since = (timezone.now() - timedelta(days=1)).isoformat()
    found = entries(auditor, since=since)
    assert [(e["model"], e["action"]) for e in found] == [("expertise_group", "created")]
    assert len(entries(auditor)) == 3  # the org key, alice, the group
    assert entries(auditor, since="2999-01-01T00:00:00Z") == []


def test_entries_are_oldest_first_and_paginated(org, alice, auditor):
    for name in ("A", "B", "C"):
        ExpertiseGroup.objects.create(organization=org, name=name, expertise=["x"])
    response = auditor.get(AUDIT, {"limit": 2, "offset": 1})
    assert response.status_code == 200
    page = response.json()
    assert page["count"] == 5
    assert page["next"] is not None and page["previous"] is not None
    assert [e["object_label"] for e in page["results"]] == ["test (organization)", "A"]
    whens = [e["when"] for e in entries(auditor)]
    assert whens == sorted(whens)


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01T00:00:00Z", "1"])
def test_a_bad_since_is_a_400(auditor, since):
    response = auditor.get(AUDIT, {"since": since})
    assert response.status_code == 400
    body = response.json()
    assert (body["success"], body["code"]) == (False, "invalid")
    assert body["error"].startswith("since:")


def test_a_bad_limit_is_a_400(auditor):
    response = auditor.get(AUDIT, {"limit": "many"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_an_agent_key_is_refused_with_403(alice, agent_client):
    response = agent_client(alice).get(AUDIT)
    assert response.status_code == 403
    assert response.json()["code"] == "human_required"


def test_no_credentials_is_a_401(anon_client):
    response = anon_client.get(AUDIT)
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


def test_an_admin_member_reads_it_with_a_session(client, org, alice):
    client.force_login(make_admin_user(org, username="bob"))
    response = client.get(AUDIT)
    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_another_organizations_changes_never_appear(org, alice, auditor, rival):
    zed = rival.agents.get()
    zed.name = "Zed II"
    zed.save()
    TeamRule.objects.create(organization=rival, allow_peer_assignment=True)
    found = entries(auditor)
    assert {e["model"] for e in found} == {"agent", "api_key"}
    assert "Zed" not in str(found) and "Rival" not in str(found)
    rival_key = KeyClient(make_key(rival))
    theirs = entries(rival_key)
    assert "agent-alice" not in str(theirs)
    kinds = {"agent", "agent_role", "expertise_group", "api_key", "team_rule"}
    assert {e["model"] for e in theirs} == kinds


# --- the admin's history pages --------------------------------------------------------------


def history_url(obj) -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_history", args=[obj.pk])


def test_the_history_page_shows_who_changed_what(client, org, alice, auditor, rival):
    assert (
        auditor.post(
            "/api/team/roles", {"agent_id": "agent-alice", "role": "specialist"}, format="json"
        ).status_code
        == 201
    )
    alice.name = "Alicia"
    alice.save()
    client.force_login(make_admin_user(org, username="bob"))
    response = client.get(history_url(alice))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Alicia" in page and "system" in page
    # The role, edited inline on the agent's page, has its table below.
    assert "Hierarchy role" in page and "Organization key: test" in page

    key = ApiKey.objects.get(organization=org)
    assert client.get(history_url(key)).status_code == 200
    group = ExpertiseGroup.objects.create(organization=org, name="Data", expertise=["SQL"])
    assert client.get(history_url(group)).status_code == 200

    TeamRule.objects.create(organization=org, allow_peer_assignment=True)
    response = client.get(history_url(org))
    assert response.status_code == 200
    assert "Team rules" in response.content.decode()


def test_another_organizations_history_is_a_404(client, org, rival):
    client.force_login(make_admin_user(org, username="bob"))
    zed = rival.agents.get()
    assert client.get(history_url(zed)).status_code == 404
    group = rival.expertise_groups.get()
    assert client.get(history_url(group)).status_code == 404
    key = ApiKey.objects.get(organization=rival)
    assert client.get(history_url(key)).status_code == 404
    version = Agent.history.filter(id=zed.pk).latest("history_id")
    url = reverse("admin:organization_agent_simple_history", args=[zed.pk, version.pk])
    assert client.get(url).status_code == 404
    # Nor once the object is gone.
    pk = zed.pk
    zed.delete()
    assert client.get(reverse("admin:organization_agent_history", args=[pk])).status_code == 404
    # An organization's page is the admin's own: another one is not found (a redirect home).
    response = client.get(history_url(rival))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")


def test_a_deleted_objects_history_stays_readable_by_its_organization(client, org, alice):
    client.force_login(make_admin_user(org, username="bob"))
    pk = alice.pk
    alice.delete()
    response = client.get(reverse("admin:organization_agent_history", args=[pk]))
    assert response.status_code == 200
    assert "Deleted" in response.content.decode()


def test_a_version_is_read_never_written_back(client, org, alice):
    client.force_login(make_admin_user(org, username="bob"))
    version = Agent.history.filter(id=alice.pk).latest("history_id")
    url = reverse("admin:organization_agent_simple_history", args=[alice.pk, version.pk])
    assert client.get(url).status_code == 200
    data = form_of(client, change_url(alice), "agent_form")
    data["name"] = "Reverted"
    assert client.post(url, data).status_code == 405
    alice.refresh_from_db()
    assert alice.name == "Alice"
