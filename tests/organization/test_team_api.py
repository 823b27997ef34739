"""Seed 003's team-hierarchy API: its TestAgentRoles, TestTeamRules, TestTeamSummary and
TestTeamIsolation cases (27), ported, plus who may write."""

import pytest

from organization.models import AgentRole, TeamRule
from tests.conftest import KeyClient
from tests.factories import make_admin_user, make_agent, make_key, make_org

pytestmark = pytest.mark.django_db


@pytest.fixture
def org(db):
    return make_org("acme")


@pytest.fixture
def alice(org):
    return make_agent(org, "agent-alice", name="AgentA")


@pytest.fixture
def bob(org):
    return make_agent(org, "agent-bob", name="AgentB")


@pytest.fixture
def charlie(org):
    return make_agent(org, "agent-charlie", name="AgentC")


@pytest.fixture
def admin(org):
    """An organization key: acts as a human administrator of `org`."""
    return KeyClient(make_key(org))


@pytest.fixture
def rival(db):
    return make_org("rival")


@pytest.fixture
def rival_admin(rival):
    return KeyClient(make_key(rival))


def set_role(client, agent_id, role="worker", **flags):
    return client.post("/api/team/roles", {"agent_id": agent_id, "role": role, **flags}, "json")


def assert_error(response, status, message):
    assert response.status_code == status, response.content
    assert response.json()["success"] is False
    assert response.json()["error"] == message


# --- TestAgentRoles (13) ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["supervisor", "worker", "specialist"])
def test_set_role(admin, alice, role):
    response = set_role(admin, "agent-alice", role, can_assign_to_peers=True)
    assert response.status_code == 201
    body = response.json()
    assert body["success"] is True
    assert body["role"]["agent_id"] == "agent-alice"
    assert body["role"]["workspace_id"] == alice.organization_id
    assert body["role"]["role"] == role
    assert body["role"]["can_assign_to_peers"] is True
    assert body["role"]["can_escalate_to_supervisor"] is True
    assert AgentRole.objects.get(agent=alice).role == role


def test_update_existing_role_upserts(admin, alice):
    set_role(admin, "agent-alice", "worker")
    response = set_role(admin, "agent-alice", "supervisor", can_escalate_to_supervisor=False)
    assert response.status_code == 201
    assert AgentRole.objects.filter(agent=alice).count() == 1
    role = AgentRole.objects.get(agent=alice)
    assert (role.role, role.can_escalate_to_supervisor) == ("supervisor", False)


def test_invalid_role_is_400(admin, alice):
    response = set_role(admin, "agent-alice", "overlord")
    assert_error(response, 400, "Invalid role. Must be one of: specialist, supervisor, worker")


def test_missing_agent_id_is_400(admin, alice):
    response = admin.post("/api/team/roles", {"role": "worker"}, "json")
    assert_error(response, 400, "agent_id is required")


def test_unknown_agent_is_404(admin, alice):
    assert_error(set_role(admin, "agent-nobody"), 404, "Agent not found in workspace")


def test_get_role(admin, alice):
    set_role(admin, "agent-alice", "specialist")
    response = admin.get("/api/team/roles/agent-alice")
    assert response.status_code == 200
    assert response.json()["role"]["role"] == "specialist"


def test_get_role_not_found(admin, alice):
    response = admin.get("/api/team/roles/agent-alice")
    assert response.status_code == 404
    assert response.json()["code"] == "role_not_found"


def test_list_roles(admin, alice, bob, charlie):
    set_role(admin, "agent-alice", "supervisor")
    set_role(admin, "agent-bob", "worker")
    response = admin.get("/api/team/roles")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert body["count"] == 2
    assert [(r["agent_id"], r["role"]) for r in body["roles"]] == [
        ("agent-alice", "supervisor"),
        ("agent-bob", "worker"),
    ]


def test_delete_role(admin, alice):
    set_role(admin, "agent-alice")
    response = admin.post("/api/team/roles/agent-alice/delete")
    assert response.status_code == 200
    assert response.json()["success"] is True
    assert not AgentRole.objects.filter(agent=alice).exists()


def test_delete_role_not_found(admin, alice):
    response = admin.post("/api/team/roles/agent-alice/delete")
    assert response.status_code == 404
    assert response.json()["code"] == "role_not_found"


def test_roles_require_auth(anon_client, alice):
    for response in (
        set_role(anon_client, "agent-alice"),
        anon_client.get("/api/team/roles"),
        anon_client.get("/api/team/roles/agent-alice"),
        anon_client.post("/api/team/roles/agent-alice/delete"),
    ):
        assert response.status_code == 401
        assert response.json()["code"] == "authentication_required"


# --- TestTeamRules (7) -----------------------------------------------------------------


def test_get_default_rules(admin, org):
    response = admin.get("/api/team/rules")
    assert response.status_code == 200
    rules = response.json()["rules"]
    assert rules["workspace_id"] == org.pk
    assert rules["allow_peer_assignment"] is False
    assert rules["require_supervisor_for_tasks"] is False
    assert rules["default_supervisor_agent_id"] is None
    assert not TeamRule.objects.filter(organization=org).exists()


def test_set_rules(admin, org):
    response = admin.post(
        "/api/team/rules",
        {"allow_peer_assignment": True, "require_supervisor_for_tasks": True},
        "json",
    )
    assert response.status_code == 201  # as seed 003's own tests assert
    assert response.json()["rules"]["allow_peer_assignment"] is True
    rule = TeamRule.objects.get(organization=org)
    assert rule.allow_peer_assignment and rule.require_supervisor_for_tasks


def test_update_rules_changes_only_the_given_fields(admin, org):
    admin.post(
        "/api/team/rules",
        {"allow_peer_assignment": True, "require_supervisor_for_tasks": True},
        "json",
    )
    response = admin.post("/api/team/rules", {"allow_peer_assignment": False}, "json")
    assert response.status_code == 201
    rules = response.json()["rules"]
    assert rules["allow_peer_assignment"] is False
    assert rules["require_supervisor_for_tasks"] is True


def test_set_default_supervisor(admin, org, alice):
    set_role(admin, "agent-alice", "supervisor")
    response = admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-alice"}, "json")
    assert response.status_code == 201
    assert response.json()["rules"]["default_supervisor_agent_id"] == "agent-alice"
    assert TeamRule.objects.get(organization=org).default_supervisor == alice


def test_cannot_set_worker_as_default_supervisor(admin, org, bob):
    set_role(admin, "agent-bob", "worker")
    response = admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-bob"}, "json")
    assert_error(response, 400, "Agent must have supervisor role to be default supervisor")
    assert response.json()["code"] == "not_a_supervisor"


def test_cannot_set_agent_without_role_as_default_supervisor(admin, org, bob):
    response = admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-bob"}, "json")
    assert_error(response, 400, "Agent must have supervisor role to be default supervisor")
    assert response.json()["code"] == "not_a_supervisor"
    assert not TeamRule.objects.filter(organization=org, default_supervisor=bob).exists()


def test_cannot_set_unknown_agent_as_default_supervisor(admin, org):
    response = admin.post(
        "/api/team/rules", {"default_supervisor_agent_id": "agent-nobody"}, "json"
    )
    assert_error(response, 404, "Supervisor agent not found in workspace")


def test_rules_require_auth(anon_client, org):
    for response in (
        anon_client.get("/api/team/rules"),
        anon_client.post("/api/team/rules", {"allow_peer_assignment": True}, "json"),
    ):
        assert response.status_code == 401
        assert response.json()["code"] == "authentication_required"


# --- TestTeamSummary (3) ---------------------------------------------------------------


def test_empty_summary(admin, org):
    response = admin.get("/api/team/summary")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert (body["supervisors"], body["workers"], body["specialists"]) == ([], [], [])
    assert body["unassigned_agents"] == []
    assert body["rules"]["require_supervisor_for_tasks"] is False


def test_summary_with_roles(admin, alice, bob, charlie):
    set_role(admin, "agent-alice", "supervisor")
    set_role(admin, "agent-bob", "specialist")
    body = admin.get("/api/team/summary").json()
    assert [r["agent_id"] for r in body["supervisors"]] == ["agent-alice"]
    assert body["workers"] == []
    assert [r["agent_id"] for r in body["specialists"]] == ["agent-bob"]
    assert body["unassigned_agents"] == [{"id": "agent-charlie", "name": "AgentC"}]


def test_summary_requires_auth(anon_client, org):
    response = anon_client.get("/api/team/summary")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


# --- TestTeamIsolation (4) -------------------------------------------------------------


def test_cannot_set_role_for_another_workspaces_agent(rival_admin, alice):
    assert_error(set_role(rival_admin, "agent-alice"), 404, "Agent not found in workspace")
    assert not AgentRole.objects.filter(agent=alice).exists()


def test_cannot_see_another_workspaces_roles(admin, rival_admin, rival, alice):
    set_role(admin, "agent-alice", "supervisor")
    make_agent(rival, "agent-rival", hierarchy_role="worker")
    body = rival_admin.get("/api/team/roles").json()
    assert [r["agent_id"] for r in body["roles"]] == ["agent-rival"]
    assert body["count"] == 1
    summary = rival_admin.get("/api/team/summary").json()
    assert summary["supervisors"] == []


def test_cannot_get_another_workspaces_agent_role(admin, rival_admin, alice):
    set_role(admin, "agent-alice", "supervisor")
    assert_error(
        rival_admin.get("/api/team/roles/agent-alice"), 404, "Agent not found in workspace"
    )


def test_cannot_set_another_workspaces_agent_as_default_supervisor(admin, rival_admin, alice):
    set_role(admin, "agent-alice", "supervisor")
    response = rival_admin.post(
        "/api/team/rules", {"default_supervisor_agent_id": "agent-alice"}, "json"
    )
    assert_error(response, 404, "Supervisor agent not found in workspace")


# --- who may write: the hierarchy is human-defined -------------------------------------


def test_an_agent_key_cannot_write_the_hierarchy(org, alice, bob, agent_client):
    AgentRole.objects.create(agent=alice, role="supervisor")
    client = agent_client(bob)
    for response in (
        set_role(client, "agent-bob", "supervisor"),
        client.post("/api/team/roles/agent-alice/delete"),
        client.post("/api/team/rules", {"require_supervisor_for_tasks": False}, "json"),
    ):
        assert response.status_code == 403
        assert response.json()["code"] == "human_required"
    assert not AgentRole.objects.filter(agent=bob).exists()
    assert AgentRole.objects.filter(agent=alice).exists()


def test_an_agent_key_cannot_read_the_hierarchy_either(org, alice, bob, agent_client, admin):
    """docs/design.md: every /api/team/* path is for an organization key or an admin member,
    reads included (as /api/audit); an agent sees its colleagues' hierarchy roles in /api/agents."""
    AgentRole.objects.create(agent=alice, role="supervisor")
    client = agent_client(bob)
    for path in (
        "/api/team/roles",
        "/api/team/roles/agent-alice",
        "/api/team/rules",
        "/api/team/summary",
    ):
        response = client.get(path)
        assert response.status_code == 403, (path, response.content)
        assert response.json() == {
            "success": False,
            "error": "Only an organization key or an admin member may do this: "
            "the hierarchy is human-defined.",
            "code": "human_required",
        }
        assert admin.get(path).status_code == 200
    # Another organization's agent stays absent (404) rather than forbidden.
    assert client.get("/api/team/roles/agent-nobody").status_code == 404


def test_a_logged_in_admin_member_can_write(org, alice, anon_client):
    anon_client.force_login(make_admin_user(org))
    assert set_role(anon_client, "agent-alice", "supervisor").status_code == 201


def test_a_logged_in_user_who_is_not_an_admin_member_is_403(org, alice, anon_client):
    anon_client.force_login(make_admin_user(None))
    response = set_role(anon_client, "agent-alice", "supervisor")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_losing_the_supervisor_role_clears_the_default_supervisor(admin, org, alice):
    set_role(admin, "agent-alice", "supervisor")
    admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-alice"}, "json")
    set_role(admin, "agent-alice", "worker")
    assert admin.get("/api/team/rules").json()["rules"]["default_supervisor_agent_id"] is None


def test_deleting_the_role_clears_the_default_supervisor(admin, org, alice):
    set_role(admin, "agent-alice", "supervisor")
    admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-alice"}, "json")
    admin.post("/api/team/roles/agent-alice/delete")
    assert TeamRule.objects.get(organization=org).default_supervisor is None


def test_default_supervisor_can_be_cleared_with_null(admin, org, alice):
    set_role(admin, "agent-alice", "supervisor")
    admin.post("/api/team/rules", {"default_supervisor_agent_id": "agent-alice"}, "json")
    response = admin.post("/api/team/rules", {"default_supervisor_agent_id": None}, "json")
    assert response.status_code == 201
    assert response.json()["rules"]["default_supervisor_agent_id"] is None


@pytest.mark.parametrize(
    "body, message",
    [
        (
            {"agent_id": "agent-alice", "role": "worker", "can_assign_to_peers": "yes"},
            "can_assign_to_peers must be a boolean",
        ),
        (["agent-alice"], "The request body must be a JSON object"),
    ],
)
def test_malformed_role_bodies_are_400(admin, alice, body, message):
    assert_error(admin.post("/api/team/roles", body, "json"), 400, message)
