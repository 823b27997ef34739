"""GET /api/delegation/recommendation: seed 001's 5 tiers, on the demo organization."""

from datetime import timedelta

import pytest

from organization.models import TeamRule
from tests.conftest import agent_of
from tests.factories import give_tasks
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


@pytest.mark.parametrize(("timeline", "decision"), [(721, "QUEUE"), (720, "ESCALATE")])
def test_queue_only_for_a_wait_shorter_than_the_urgency_timeline(
    demo, agent_client, timeline, decision
):
    # Seed 001's tier 4: "estimated_wait_time < urgency_timeline" (the stale threshold): a wait
    # as long as the timeline itself escalates. Jordan's wait is 720 s (test above).
    TeamRule.objects.filter(organization=demo).update(
        stale_after_normal=timedelta(seconds=timeline)
    )
    body = recommend(demo, agent_client, "agent-alex", "Kubernetes")
    assert body["candidates"][0]["estimated_wait_seconds"] == 720
    assert body["decision"] == decision
    assert body["primary_choice"]["id"] == (
        "agent-jordan" if decision == "QUEUE" else "agent-alice"
    )


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


# --- issue 8 §6: priorities 1-3 need an available colleague, as the roster says -------------


def cast_recommend(cast, agent, expertise, urgency="normal"):
    response = cast.client(agent).get(
        f"/api/delegation/recommendation?expertise={expertise}&urgency={urgency}"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_busy_same_team_expert_with_room_is_not_priority_1(cast):
    give_tasks(cast.alex, 4)  # 4/5: busy, one slot left
    body = cast_recommend(cast, cast.sarah, "PostgreSQL")
    # Morgan (other team, idle) is available: priority 3, before the busy Alex.
    assert tiers(body)[:2] == [("agent-morgan", 3), ("agent-alex", 4)]
    alex = body["candidates"][1]
    assert alex["status"] == "busy"
    assert alex["tier_name"] == "busy_with_room"
    assert "busy" in alex["reason"] and "4/5" in alex["reason"]
    assert body["decision"] == "DELEGATE"
    assert body["primary_choice"]["id"] == "agent-morgan"
    assert body["fallback"]["id"] == "agent-alex"


def test_a_busy_colleague_with_room_is_offered_when_nobody_is_available(cast):
    give_tasks(cast.alex, 4)
    give_tasks(cast.morgan, 5)  # full: only to queue for
    body = cast_recommend(cast, cast.sarah, "PostgreSQL")
    assert tiers(body) == [("agent-alex", 4), ("agent-morgan", 4), ("agent-boss", 5)]
    assert [c["tier_name"] for c in body["candidates"][:2]] == [
        "busy_with_room",
        "queue_for_expert",
    ]
    assert body["decision"] == "DELEGATE"
    assert body["primary_choice"]["id"] == "agent-alex"
    assert "busy (4/5) but still has room" in body["reasoning"]


def test_every_priority_1_to_3_candidate_is_in_the_available_roster(demo, agent_client):
    for handle in ("agent-sarah", "agent-alex", "agent-taylor", "agent-jordan"):
        client = agent_client(agent_of(demo, handle))
        available = {
            c["id"] for c in client.get("/api/roster?filter=available").json()["colleagues"]
        }
        for expertise in ("PostgreSQL", "MySQL", "CSS", "Figma", "Kubernetes", "Planning"):
            body = client.get(f"/api/delegation/recommendation?expertise={expertise}").json()
            direct = {c["id"] for c in body["candidates"] if c["tier"] <= 3}
            assert direct <= available, (handle, expertise, direct - available)


def test_a_cross_team_primary_choice_carries_the_coordination_note(demo, agent_client):
    body = recommend(demo, agent_client, "agent-sarah", "Figma")
    assert body["primary_choice"]["id"] == "agent-taylor"
    assert body["cross_team"] is True
    assert (
        "Notes: Cross-team delegation: agent-sarah (Development) to agent-taylor (Design)"
        in (body["decision_text"])
    )
    same_team = recommend(demo, agent_client, "agent-sarah", "PostgreSQL")
    assert same_team["cross_team"] is False
    assert "Notes:" not in same_team["decision_text"]


def test_only_agents_holding_the_expertise_or_a_related_term_are_read(demo, agent_client):
    """Everyone else could never be a candidate: recommending in a large organization reads
    the few who could (and the asker), not every agent."""
    from django.db.models.signals import post_init

    from organization.models import Agent
    from tests.factories import make_agent

    for n in range(60):
        make_agent(demo, f"agent-filler-{n}", expertise=["Knitting"], team=None)
    read = []

    def count(sender, instance, **kwargs):
        read.append(instance.handle)

    post_init.connect(count, sender=Agent)
    try:
        body = recommend(demo, agent_client, "agent-sarah", "MySQL")
    finally:
        post_init.disconnect(count, sender=Agent)
    assert [c["id"] for c in body["candidates"]][:2] == ["agent-alex", "agent-database-lead"]
    assert not [h for h in read if h.startswith("agent-filler-")]
    holders = {
        a.handle
        for a in Agent.objects.filter(organization=demo)
        if {"MySQL", "PostgreSQL", "Redis"} & set(a.expertise)
    }
    # The asker, the holders, and the agents read with them (a senior, the key's agent).
    assert holders <= set(read) and len(set(read)) <= len(holders) + 4


def recommended_as(demo, handle: str, expertise: str, queries: int, assert_queries) -> dict:
    """The recommendation tool's answer for agent `handle`, in at most `queries` queries."""
    from organization import registry
    from organization.caller import caller_for_agent

    caller = caller_for_agent(agent_of(demo, handle))
    with assert_queries(queries):
        return registry.call_tool(caller, "recommend_delegate", {"expertise": expertise})


def test_a_recommendation_is_three_queries_escalation_target_included(
    demo, django_assert_max_num_queries
):
    """The team rule, the expertise groups, and the candidates with the asker — whose senior
    (the escalation target, shown with its team) is read with them."""
    body = recommended_as(demo, "agent-sarah", "Rust", 3, django_assert_max_num_queries)
    assert body["escalate_to"]["id"] == "agent-alice"
    assert body["escalate_to"]["team"] == agent_of(demo, "agent-alice").team.name


def test_escalating_to_the_default_supervisor_reads_its_team_with_the_rule(
    demo, django_assert_max_num_queries
):
    TeamRule.objects.update_or_create(
        organization=demo, defaults={"default_supervisor": agent_of(demo, "agent-taylor")}
    )
    # Alice has no senior: she escalates to the default supervisor.
    body = recommended_as(demo, "agent-alice", "Rust", 3, django_assert_max_num_queries)
    assert (body["escalate_to"]["id"], body["escalate_to"]["team"]) == ("agent-taylor", "Design")


@pytest.mark.django_db
def test_a_deep_reporting_line_costs_the_recommendation_no_more_queries():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from organization.models import Team
    from tasks.recommend import recommend
    from tests.factories import make_agent, make_org

    def queries(depth: int) -> int:
        org = make_org(f"line-{depth}")
        ours, theirs = (Team.objects.create(organization=org, name=n) for n in ("a", "b"))
        boss = make_agent(org, f"agent-boss-{depth}", team=ours)
        senior = boss
        for level in range(depth):  # a line of reports on another team, `depth` deep
            senior = make_agent(
                org, f"agent-r{depth}-{level}", senior=senior, team=theirs, expertise=["Go"]
            )
        with CaptureQueriesContext(connection) as seen:
            recommend(org=org, agent=boss, expertise="Go")
        return len(seen)

    assert queries(1) == queries(6)
