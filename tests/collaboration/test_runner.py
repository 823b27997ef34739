"""The runner in this process (as the worker runs it), with the offline provider or the fake server."""

import pytest

from collaboration.models import CollaborationSession
from collaboration.providers import LLMReply
from collaboration.providers.offline import BANNER
from collaboration.runner import agent
from collaboration.runner.context import RunContext, Slot
from tests.collaboration.conftest import event_names, run, specialists
from tests.collaboration.starts import create
from tests.conftest import requires_postgres
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_parallel_session_completes_offline_with_every_event(acme, offline):
    session = run(create(acme))
    assert session.status == "completed"
    contributions = list(session.contributions.order_by("position"))
    assert [c.status for c in contributions] == ["completed"] * 3
    assert all(c.response.startswith(BANNER) and c.provider == "offline" for c in contributions)
    assert all(c.confidence is not None for c in contributions)
    assert session.result.startswith(BANNER)
    names = event_names(session)
    assert names[:2] == ["queued", "start"]
    assert names.count("agent:start") == 3 and names.count("agent:complete") == 3
    assert names[-2:] == ["synthesis:start", "complete"]
    assert set(session.metadata["agent_durations_ms"]) == {c.agent_key for c in contributions}
    assert session.metadata["duration_ms"] >= 0
    complete = session.events.get(name="tool:collaborative:complete")
    assert complete.data == {"status": "completed", "agents_count": 3, "total_tokens": 0}


@pytest.mark.parametrize("mode", ["parallel", "hierarchical"])
def test_the_offline_provider_reports_no_tokens(acme, offline, mode):
    """It called no model: every contribution, the plan and the synthesis spent 0 tokens."""
    session = run(create(acme, mode=mode))
    assert session.status == "completed", session.error
    for c in session.contributions.all():
        assert (c.prompt_tokens, c.completion_tokens, c.tokens_used) == (0, 0, 0), c.agent_key
    assert session.metadata["agent_tokens"] == 0
    assert session.metadata["synthesis_tokens"] == 0
    assert session.metadata["total_tokens"] == 0


@pytest.mark.parametrize("mode", ["parallel", "sequential", "hierarchical"])
@pytest.mark.parametrize("strategy", ["coordinator", "vote", "merge", "best_of"])
def test_every_mode_and_synthesis_works_offline(acme, offline, mode, strategy):
    session = run(create(acme, mode=mode, synthesis=strategy))
    assert session.status == "completed", session.error
    assert session.result
    assert session.consensus["agents_count"] == (2 if mode == "hierarchical" else 3)
    assert session.consensus["agreement_score"] is not None


def test_hierarchical_offline_assigns_a_subtask_to_each_specialist(acme, offline):
    session = run(create(acme, mode="hierarchical"))
    coordinator, *rest = session.contributions.order_by("position")
    assert coordinator.role == "coordinator"
    assert coordinator.response == session.metadata["plan"]["plan"]
    assert coordinator.response == f"{BANNER} One subtask per specialist."
    assert all(c.subtask and c.status == "completed" for c in rest)
    assert session.metadata["plan"]["valid"] is True
    assert "fallback" not in event_names(session)


def test_sequential_agents_see_the_previous_contributions(acme, fake_llm):
    fake_llm.on(agent="analyzer", replies=Reply("ANALYSIS-MARKER"))
    fake_llm.on(agent="designer", replies=Reply("DESIGN-MARKER"))
    run(
        create(
            acme,
            mode="sequential",
            synthesis="merge",
            agents=specialists("analyzer", "designer", "critic"),
        )
    )
    designer = fake_llm.calls_for(agent="designer")[0]
    critic = fake_llm.calls_for(agent="critic")[0]
    assert "ANALYSIS-MARKER" in designer.prompt and "DESIGN-MARKER" not in designer.prompt
    assert "ANALYSIS-MARKER" in critic.prompt and "DESIGN-MARKER" in critic.prompt
    assert designer.started >= fake_llm.calls_for(agent="analyzer")[0].ended


def test_all_agents_failing_fails_the_session_with_the_reasons(acme, fake_llm):
    fake_llm.on(purpose="agent", replies=Reply(status=400))
    session = run(create(acme, agents=specialists("a", "b")))
    assert session.status == "failed"
    assert session.error.startswith("every agent failed — a: openai: HTTP 400")
    assert "b: openai: HTTP 400" in session.error
    assert not fake_llm.calls_for(purpose="synthesis")
    assert event_names(session).count("agent:failed") == 2


def test_the_token_budget_stops_further_agents(acme, fake_llm):
    fake_llm.on(agent="a", replies=Reply("big", prompt_tokens=80, completion_tokens=40))
    session = run(
        create(
            acme,
            mode="sequential",
            synthesis="merge",
            max_total_tokens=100,
            agents=specialists("a", "b"),
        )
    )
    a, b = session.contributions.order_by("position")
    assert a.status == "completed" and a.tokens_used == 120
    assert b.status == "failed" and "token budget exhausted" in b.error
    assert not fake_llm.calls_for(agent="b")
    assert session.status == "partial"


def test_the_api_returns_every_field_the_issue_names_and_events_in_order(
    acme, fake_llm, org_client
):
    fake_llm.on(agent="a", replies=Reply("answer a\nVERDICT: yes\nCONFIDENCE: 0.9", delay=0.05))
    fake_llm.on(agent="b", replies=Reply("answer b\nVERDICT: yes\nCONFIDENCE: 0.7"))
    client = org_client(acme)
    session_id = client.post(
        "/api/collaborations",
        {"task": "t", "mode": "sequential", "synthesis": "vote", "agents": specialists("a", "b")},
        format="json",
    ).json()["id"]
    run(CollaborationSession.objects.get(pk=session_id))
    response = client.get(f"/api/collaborations/{session_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed" and body["result"]
    a, b = body["contributions"]
    assert set(a) >= {
        "agent",
        "role",
        "response",
        "confidence",
        "tokens_used",
        "status",
        "error",
        "started_at",
        "finished_at",
    }
    assert (a["agent"], a["role"], a["status"], a["confidence"], a["error"]) == (
        "a",
        "a",
        "completed",
        0.9,
        "",
    )
    assert a["response"].startswith("answer a") and a["tokens_used"] > 0
    assert a["started_at"] <= a["finished_at"] <= b["started_at"]
    consensus = body["consensus"]
    assert (consensus["agents_count"], consensus["has_consensus"]) == (2, True)
    assert consensus["agreement_score"] == 1.0
    assert consensus["key_agreements"] and consensus["key_disagreements"] == []
    metadata = body["metadata"]
    assert (metadata["agents_count"], metadata["mode"], metadata["synthesis"]) == (
        2,
        "sequential",
        "vote",
    )
    assert metadata["total_tokens"] == a["tokens_used"] + b["tokens_used"]
    assert metadata["duration_ms"] >= 50
    assert set(metadata["agent_durations_ms"]) == {"a", "b"}
    assert metadata["agent_durations_ms"]["a"] >= 50
    assert [e["name"].removeprefix("tool:collaborative:") for e in body["events"]] == [
        "queued",
        "start",
        "agent:start",
        "agent:complete",
        "agent:start",
        "agent:complete",
        "synthesis:start",
        "complete",
    ]
    assert [e["data"].get("agent") for e in body["events"][2:6]] == ["a", "a", "b", "b"]


def test_hierarchical_specialists_run_in_parallel_after_the_plan(acme, fake_llm):
    fake_llm.on(purpose="agent", replies=Reply("an answer", delay=0.4))
    session = run(
        create(
            acme, mode="hierarchical", synthesis="merge", agents=specialists("coord", "x", "y", "z")
        )
    )
    assert session.status == "completed", session.error
    plan = fake_llm.calls_for(purpose="plan")[0]
    workers = [fake_llm.calls_for(agent=n)[0] for n in ("x", "y", "z")]
    assert all(c.started >= plan.ended for c in workers)
    # All three were in flight together: each started before any of them ended.
    assert max(c.started for c in workers) < min(c.ended for c in workers)
    assert fake_llm.peak_concurrency == 3


def test_one_contribution_row_per_session_and_agent(acme, offline):
    from django.db import IntegrityError, transaction

    from collaboration.models import Contribution

    session = create(acme, agents=specialists("a", "b"))
    with pytest.raises(IntegrityError), transaction.atomic():
        Contribution.objects.create(session=session, position=9, agent_key="a")
    assert session.contributions.count() == 2


@requires_postgres()
def test_an_agents_claim_and_settle_are_one_statement_each(acme, django_assert_num_queries):
    session = create(acme, agents=specialists("a"))
    contribution = session.contributions.get()
    ctx, slot = RunContext(session=session), Slot(contribution)
    with django_assert_num_queries(1):
        assert agent.start(ctx, slot) is contribution
    assert agent.start(ctx, slot) is None  # claimed once
    reply = LLMReply(text="Fine.\nVERDICT: yes\nCONFIDENCE: 0.7", prompt_tokens=3)
    with django_assert_num_queries(1):
        assert agent.settle(ctx, contribution, "completed", reply=reply)
    assert not agent.settle(ctx, contribution, "timed_out", error="late")  # settled once
    assert (contribution.status, contribution.verdict) == ("completed", "yes")  # kept in step
    contribution.refresh_from_db()
    assert (contribution.status, contribution.confidence, contribution.tokens_used) == (
        "completed",
        0.7,
        3,
    )
    events = list(session.events.order_by("id").values_list("name", "data"))
    assert events[-2:] == [
        ("tool:collaborative:agent:start", {"agent": "a", "role": "a"}),
        ("tool:collaborative:agent:complete", {"agent": "a", "tokens": 3}),
    ]
