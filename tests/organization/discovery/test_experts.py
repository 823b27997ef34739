"""GET /api/experts and the discover_experts tool: same-worktree experts, idle or busy."""

import pytest

from organization.discovery.status import status_file

pytestmark = pytest.mark.django_db


def experts_of(response):
    assert response.status_code == 200, response.content
    return {e["agent_id"]: e for e in response.json()["experts"]}


def test_main_repo_agents_see_only_main_repo_experts(acme, cast, agent_client, no_manifest_dir):
    """Property 1: null matches only null; the caller is excluded."""
    found = experts_of(agent_client(cast["alyosha"]).get("/api/experts"))
    assert list(found) == ["agent-dmitri"]


def test_worktree_agents_see_only_the_same_worktree(acme, cast, agent_client, no_manifest_dir):
    assert list(experts_of(agent_client(cast["ivan"]).get("/api/experts"))) == ["agent-grusha"]
    assert list(experts_of(agent_client(cast["smerdy"]).get("/api/experts"))) == []


def test_each_expert_has_the_seed_fields_and_a_status(acme, cast, agent_client, manifest_dir):
    path = status_file(acme, cast["grusha"].pk)
    path.parent.mkdir(parents=True)
    path.write_text("pending\n")
    response = agent_client(cast["ivan"]).get("/api/experts")
    assert response.json() == {
        "agent_id": "agent-ivan",
        "expert_id": cast["ivan"].pk,
        "worktree_path": "/repo/wt-1",
        "experts": [
            {
                "expert_id": cast["grusha"].pk,
                "name": "Grusha",
                "role": "tester",
                "worktree_path": "/repo/wt-1",
                "agent_id": "agent-grusha",
                "status": "idle",
            }
        ],
    }


def test_paused_agents_are_experts_too(acme, cast, agent_client, no_manifest_dir):
    cast["dmitri"].is_paused = True
    cast["dmitri"].save()
    found = experts_of(agent_client(cast["alyosha"]).get("/api/experts"))
    assert found["agent-dmitri"]["status"] == "busy"


def test_the_tool_answers_what_the_endpoint_answers(acme, cast, agent_client, no_manifest_dir):
    client = agent_client(cast["ivan"])
    rest = client.get("/api/experts").json()
    tool = client.post(
        "/api/agent-engine/call-tool", {"toolName": "discover_experts", "params": {}}, format="json"
    )
    assert tool.status_code == 200
    assert tool.json() == rest


def test_the_tool_is_read_only(db):
    from organization.registry import REGISTRY

    assert REGISTRY["discover_experts"].read_only is True


def test_an_organization_key_looks_from_a_named_agent(acme, cast, org_client, no_manifest_dir):
    client = org_client(acme)
    assert list(experts_of(client.get("/api/experts?agent=agent-ivan"))) == ["agent-grusha"]
    assert len(experts_of(client.get("/api/experts"))) == 5
    missing = client.get("/api/experts?agent=agent-nobody")
    assert missing.status_code == 404
    assert missing.json()["code"] == "agent_not_found"


def test_an_agent_cannot_look_from_another_agents_worktree(
    acme, cast, agent_client, no_manifest_dir
):
    response = agent_client(cast["alyosha"]).get("/api/experts?agent=agent-ivan")
    assert response.status_code == 403
    assert response.json()["code"] == "identity_mismatch"


def test_experts_stay_within_the_organization(acme, cast, other_org, agent_client, no_manifest_dir):
    from tests.factories import make_agent

    make_agent(other_org, "agent-twin", worktree_path=None)
    assert "agent-twin" not in experts_of(agent_client(cast["alyosha"]).get("/api/experts"))


def test_the_query_count_does_not_grow_with_experts(
    acme, cast, agent_client, no_manifest_dir, django_assert_max_num_queries
):
    from tests.factories import make_agent

    for n in range(20):
        make_agent(acme, f"agent-extra-{n}")
    client = agent_client(cast["alyosha"])
    with django_assert_max_num_queries(4):
        assert len(experts_of(client.get("/api/experts"))) == 21
