"""GET /api/delegation/recommendation: seed 001's 5 tiers, on the demo organization."""

import pytest

from organization.models import TeamRule
from tests.conftest import agent_of
from tests.tasks.conftest import assert_error

pytestmark = pytest.mark.django_db


def recommend(demo, agent_client, handle, expertise, urgency="normal", extra=""):
    client = agent_client(agent_of(demo, handle))
    response = client.get(
        f"/api/delegation/recommendation?expertise={expertise}&urgency={urgency}{extra}"
    )
    assert response.status_code == 200, response.content
    return response.json()


def tiers(body):
    return [(c["id"], c["tier"]) for c in body["candidates"]]


def test_tier_1_same_team_exact_match(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "PostgreSQL")
    assert tiers(body)[0] == ("agent-alex", 1)
    assert body["decision"] == "DELEGATE"
    assert body["primary_choice"]["id"] == "agent-alex"
    assert "same team" in body["primary_choice"]["reason"]
    assert body["decision_text"].startswith("DELEGATION DECISION:\nPrimary Choice: Alex")


def test_tier_2_same_team_related_expertise_from_the_expertise_groups(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "MySQL")
    assert body["related_expertise"] == ["PostgreSQL", "Redis"]
    # Morgan (MySQL expert, 5/5) is tier 4; Alex (PostgreSQL, same team, 1/5) is tier 2.
    assert tiers(body)[:2] == [("agent-alex", 2), ("agent-database-lead", 4)]
    assert body["decision"] == "DELEGATE"
    assert body["fallback"]["id"] == "agent-database-lead"


def test_tier_3_cross_team_exact_match(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "Figma")
    assert tiers(body)[0] == ("agent-taylor", 3)
    assert "coordination overhead" in body["primary_choice"]["reason"]


def test_tier_4_queue_for_the_busy_expert_with_an_estimated_wait(demo, agent_client):
    body = recommend(demo, agent_client, "agent-alex", "Kubernetes")
    assert tiers(body) == [("agent-jordan", 4), ("agent-alice", 5)]
    assert body["decision"] == "QUEUE"
    assert body["primary_choice"]["estimated_wait_seconds"] == 720
    assert "Wait Time: 720 s" in body["decision_text"]


def test_a_wait_beyond_the_urgency_timeline_escalates(demo, agent_client):
    rule = TeamRule.objects.get(organization=demo)
    rule.stale_after_critical = rule.stale_after_critical.__class__(minutes=5)
    rule.save()
    body = recommend(demo, agent_client, "agent-alex", "Kubernetes", urgency="critical")
    assert body["decision"] == "ESCALATE"
    assert body["primary_choice"]["id"] == "agent-alice"


def test_tier_5_escalates_to_the_senior_when_nobody_fits(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "Rust")
    assert tiers(body) == [("agent-alice", 5)]
    assert body["decision"] == "ESCALATE"
    assert body["escalate_to"]["id"] == "agent-alice"
    assert "your senior" in body["escalate_to"]["reason"]


def test_offline_agents_are_never_candidates(demo, agent_client):
    body = recommend(demo, agent_client, "agent-alex", "Terraform")
    assert "agent-sam" not in [c["id"] for c in body["candidates"]]


def test_exclude_removes_candidates(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "PostgreSQL", extra="&exclude=agent-alex")
    assert tiers(body)[0] == ("agent-database-lead", 4)


def test_hierarchy_rules_filter_candidates_when_enforced(demo, agent_client):
    TeamRule.objects.filter(organization=demo).update(require_supervisor_for_tasks=True)
    body = recommend(demo, agent_client, "agent-sarah", "PostgreSQL")
    # Sarah (worker, no peer rights) may not assign to Alex or Morgan: escalate.
    assert tiers(body) == [("agent-alice", 5)]
    assert body["decision"] == "ESCALATE"


def test_expertise_is_required(demo, agent_client):
    client = agent_client(agent_of(demo, "agent-sarah"))
    assert_error(client.get("/api/delegation/recommendation"), 400, "invalid", "expertise")
