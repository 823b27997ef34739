"""The runner in this process (as the worker runs it), with the offline provider or the fake server."""

import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from collaboration import runner
from collaboration.models import CollaborationSession
from collaboration.providers import LLMReply
from collaboration.providers.offline import BANNER
from collaboration.runner import agent
from collaboration.runner.context import RunContext, Slot
from collaboration.services import session_cancel, session_create
from tests.collaboration.conftest import event_names, human, run, specialists, wait_for
from tests.conftest import requires_postgres
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def create(org, **payload):
    payload.setdefault("task", "Should we use microservices or a monolith?")
    payload.setdefault(
        "agents", specialists("security-reviewer", "perf-reviewer", "maint-reviewer")
    )
    return session_create(caller=human(org), payload=payload)


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


def test_vote_tallies_normalised_verdicts(acme, fake_llm):
    replies = {
        "a": "Ship it.\nVERDICT: **Approve**\nCONFIDENCE: 90%",
        "b": "Looks fine.\nVERDICT: yes\nCONFIDENCE: 0.7",
        "c": "Too risky.\nVERDICT: No.\nCONFIDENCE: 0.6",
    }
    for name, text in replies.items():
        fake_llm.on(agent=name, replies=Reply(text))
    session = run(create(acme, agents=specialists("a", "b", "c"), synthesis="vote"))
    assert session.status == "completed"
    assert [c.verdict for c in session.contributions.order_by("position")] == ["yes", "yes", "no"]
    assert session.consensus["method"] == "verdict_majority"
    assert session.consensus["agreement_score"] == pytest.approx(2 / 3, abs=0.001)
    assert session.consensus["has_consensus"] is True
    assert session.consensus["key_disagreements"] == ["c (c): no"]
    assert "## Majority Conclusion\nVERDICT: yes — 2 of 3 agents (67%)" in session.result
    assert "## Divergent Views\n- c (c): no, confidence 0.60" in session.result
    assert "End your answer with two lines:\nVERDICT:" in fake_llm.calls_for(agent="a")[0].prompt


def test_a_vote_decided_by_the_confidence_tie_break_says_so(acme, fake_llm):
    fake_llm.on(agent="a", replies=Reply("Ship it.\nVERDICT: yes\nCONFIDENCE: 0.6"))
    fake_llm.on(agent="b", replies=Reply("Hold it.\nVERDICT: no\nCONFIDENCE: 0.9"))
    session = run(create(acme, agents=specialists("a", "b"), synthesis="vote"))
    assert session.status == "completed"
    assert session.consensus["decided_by"] == "confidence_tie_break"
    assert session.consensus["has_consensus"] is False
    assert "majority" not in session.result.lower()
    assert "Consensus (1 points)" not in session.result
    assert session.result.startswith("## Consensus (none: the vote is tied)")
    assert (
        "## Conclusion (tie broken by confidence)\nVERDICT: no — tied at 1 of 2 agents each; the "
        "higher summed confidence decided (no 0.90 against yes 0.60)." in session.result
    )
    assert "## Divergent Views\n- a (a): yes, confidence 0.60 — Ship it." in session.result


def test_best_of_takes_the_most_confident(acme, fake_llm):
    for name, conf in {"a": 0.4, "b": 0.9, "c": 0.6}.items():
        fake_llm.on(agent=name, replies=Reply(f"answer {name}\nCONFIDENCE: {conf}"))
    session = run(create(acme, agents=specialists("a", "b", "c"), synthesis="best_of"))
    assert session.result.startswith("## Best of 3: b (b, confidence 0.90; highest confidence)")
    assert "answer b" in session.result
    assert session.metadata["best_of"]["agent"] == "b"


def test_a_best_of_tie_goes_to_the_earliest_without_a_coordinator(acme, fake_llm):
    fake_llm.on(agent="a", replies=Reply("answer a\nCONFIDENCE: 0.8"))
    fake_llm.on(agent="b", replies=Reply("answer b\nCONFIDENCE: 0.8"))
    session = run(create(acme, agents=specialists("a", "b"), synthesis="best_of"))
    assert session.metadata["best_of"] == {
        "agent": "a",
        "confidence": 0.8,
        "tied": ["a", "b"],
        "how": "tie broken by order: the earliest",
    }
    assert not fake_llm.calls_for(purpose="judge")


def test_a_best_of_tie_goes_to_the_coordinator_when_configured(acme, fake_llm):
    fake_llm.on(agent="a", replies=Reply("answer a\nCONFIDENCE: 0.8"))
    fake_llm.on(agent="b", replies=Reply("answer b\nCONFIDENCE: 0.8"))
    fake_llm.on(purpose="judge", replies=Reply("BEST: b"))
    session = run(
        create(
            acme,
            agents=specialists("a", "b"),
            synthesis="best_of",
            coordinator_config={"model": "judge-model"},
        )
    )
    assert session.metadata["best_of"]["agent"] == "b"
    assert session.metadata["best_of"]["how"] == "tie broken by the coordinator"
    assert fake_llm.calls_for(purpose="judge")[0].model == "judge-model"


def test_merge_keeps_one_section_per_agent(acme, offline):
    session = run(create(acme, synthesis="merge"))
    assert session.result.count("### ") == 3
    assert "### security-reviewer (security)" in session.result


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


def test_the_coordinator_synthesis_uses_the_seeds_prompt_and_config(acme, fake_llm):
    fake_llm.on(
        purpose="synthesis", replies=Reply("THE SYNTHESIS", prompt_tokens=11, completion_tokens=4)
    )
    session = run(create(acme, coordinator_config={"model": "big-model", "temperature": 0.2}))
    call = fake_llm.calls_for(purpose="synthesis")[0]
    assert call.model == "big-model" and call.temperature == 0.2
    assert "You are synthesizing contributions from multiple specialist agents." in call.prompt
    assert session.result == "THE SYNTHESIS"
    assert session.metadata["synthesis_tokens"] == 15


def test_the_coordinator_configs_system_prompt_is_the_coordinators(acme, fake_llm):
    """coordinator_config takes a system_prompt as an ad-hoc agent's config does: the
    coordinator's calls (the synthesis, a best_of judgement) are sent it."""
    run(create(acme, coordinator_config={"system_prompt": "You are the CFO. Be terse."}))
    assert fake_llm.calls_for(purpose="synthesis")[0].system == "You are the CFO. Be terse."
    fake_llm.on(purpose="agent", replies=Reply("same\nCONFIDENCE: 0.5"))
    run(
        create(
            acme,
            synthesis="best_of",
            agents=specialists("a", "b"),
            coordinator_config={"system_prompt": "You judge as the CFO."},
        )
    )
    assert fake_llm.calls_for(purpose="judge")[0].system == "You judge as the CFO."
    # Without one, the coordinator is told what it is.
    run(create(acme, agents=specialists("c")))
    assert fake_llm.calls_for(purpose="synthesis")[1].system.startswith(
        "You are the coordinator of a collaborative session"
    )


def test_the_coordinator_model_setting_is_the_coordinators_default(acme, fake_llm, settings):
    settings.COLLAB_COORDINATOR_MODEL = "coordinator-model"
    run(create(acme, agents=specialists("a", "b")))
    assert fake_llm.calls_for(purpose="synthesis")[0].model == "coordinator-model"
    assert {c.model for c in fake_llm.calls_for(purpose="agent")} == {"fake-model"}
    # The session's coordinator_config still wins.
    run(create(acme, agents=specialists("c"), coordinator_config={"model": "big-model"}))
    assert fake_llm.calls_for(purpose="synthesis")[1].model == "big-model"


def test_a_hierarchical_coordinator_without_a_model_uses_the_coordinator_model(
    acme, fake_llm, settings
):
    settings.COLLAB_COORDINATOR_MODEL = "coordinator-model"
    run(hierarchical(acme, "coord", "backend"))
    assert fake_llm.calls_for(purpose="plan")[0].model == "coordinator-model"
    assert fake_llm.calls_for(purpose="synthesis")[0].model == "coordinator-model"
    assert fake_llm.calls_for(agent="backend")[0].model == "fake-model"


def test_a_failed_coordinator_synthesis_falls_back_to_merge(acme, fake_llm):
    fake_llm.on(purpose="synthesis", replies=Reply(status=400))
    session = run(create(acme))
    assert session.status == "partial"
    assert session.result.count("### ") == 3
    fallback = session.events.get(name="tool:collaborative:fallback")
    assert fallback.data["stage"] == "synthesis" and fallback.data["action"] == "merge"


def test_a_finished_session_is_not_run_again(acme, fake_llm):
    session = run(create(acme))
    calls = len(fake_llm.calls)
    assert runner.run_session(session.pk) == runner.FINISHED
    assert len(fake_llm.calls) == calls
    assert event_names(session).count("complete") == 1


def test_a_redelivered_session_resumes_without_rerunning_finished_agents(acme, fake_llm):
    session = create(acme, agents=specialists("a", "b", "c"), synthesis="merge")
    # The state a worker leaves when it dies: a done, b in flight, c not started.
    CollaborationSession.objects.filter(pk=session.pk).update(
        status="running",
        attempts=1,
        lease_token="dead",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
        started_at=timezone.now(),
    )
    session.contributions.filter(agent_key="a").update(
        status="completed", response="A DONE", tokens_used=7
    )
    session.contributions.filter(agent_key="b").update(status="running", started_at=timezone.now())
    session = run(session)
    assert session.status == "completed"
    assert not fake_llm.calls_for(agent="a")
    assert len(fake_llm.calls_for(agent="b")) == 1 and len(fake_llm.calls_for(agent="c")) == 1
    assert "A DONE" in session.result
    resume = session.events.get(name="tool:collaborative:resume")
    assert resume.data == {"attempt": 2, "rerun": ["b"]}
    assert session.metadata["attempts"] == 2


def test_a_session_started_its_maximum_times_without_finishing_is_given_up(
    acme, fake_llm, settings
):
    """Its worker died on every start (a crash, the time limit): the next start fails it,
    saying so, without calling a model again; one start fewer still resumes it."""
    settings.COLLAB_MAX_ATTEMPTS = 2
    session = create(acme, agents=specialists("a", "b"), synthesis="merge")
    died = {
        "status": "running",
        "lease_token": "dead",
        "started_at": timezone.now(),
        "heartbeat_at": timezone.now() - timedelta(minutes=5),
    }
    CollaborationSession.objects.filter(pk=session.pk).update(attempts=2, **died)
    session.contributions.filter(agent_key="b").update(status="running", started_at=timezone.now())
    session = run(session)
    assert (session.status, session.attempts) == ("failed", 3)
    assert session.error.startswith("Given up after 2 starts that did not finish")
    assert not fake_llm.calls
    assert event_names(session).count("complete") == 1

    again = create(acme, agents=specialists("a"), synthesis="merge")
    CollaborationSession.objects.filter(pk=again.pk).update(attempts=1, **died)
    assert run(again).status == "completed"


def test_a_synthesis_run_again_after_a_resume_counts_every_calls_tokens(acme, fake_llm):
    """The first run loses its lease while its synthesis is in flight; a resumed run synthesizes
    again and finishes; the first run's answer comes later. Both calls spent tokens: the total
    counts both."""
    import threading

    from django.db import connection

    fake_llm.on(purpose="agent", replies=Reply("an answer", prompt_tokens=5, completion_tokens=2))
    fake_llm.on(
        purpose="synthesis",
        replies=[
            Reply("SLOW", delay=1.5, prompt_tokens=10, completion_tokens=5),
            Reply("FAST", prompt_tokens=3, completion_tokens=1),
        ],
    )
    session = create(acme, agents=specialists("a"))

    def first_run():
        try:
            runner.run_session(session.pk)
        finally:
            connection.close()

    first = threading.Thread(target=first_run)
    first.start()
    wait_for(lambda: fake_llm.calls_for(purpose="synthesis"))
    # The first run's heartbeat stops counting (another token), as if its worker had stalled.
    CollaborationSession.objects.filter(pk=session.pk).update(
        lease_token="stalled", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    session = run(session)
    assert session.result == "FAST" and session.attempts == 2
    first.join(timeout=20)
    session.refresh_from_db()
    assert [c.answered for c in fake_llm.calls_for(purpose="synthesis")] == [True, True]
    assert session.metadata["agent_tokens"] == 7
    assert session.metadata["synthesis_tokens"] == 15 + 4
    assert session.metadata["total_tokens"] == 7 + 15 + 4


def test_a_session_with_a_live_lease_elsewhere_is_left_alone(acme, fake_llm):
    session = create(acme)
    CollaborationSession.objects.filter(pk=session.pk).update(
        status="running", attempts=1, lease_token="alive", heartbeat_at=timezone.now()
    )
    assert runner.run_session(session.pk) == runner.BUSY
    assert not fake_llm.calls


def test_a_missing_session_is_ignored(db):
    import uuid

    assert runner.run_session(uuid.uuid4()) == runner.MISSING


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


def hierarchical(org, *names, **payload):
    coordinator = {
        "name": names[0],
        "role": "coordinator",
        "focus": "decompose, assign, synthesize",
    }
    return create(
        org, mode="hierarchical", agents=[coordinator, *specialists(*names[1:])], **payload
    )


def test_the_coordinators_own_focus_is_in_its_planning_prompt(acme, fake_llm):
    session = run(hierarchical(acme, "coord", "backend", "frontend", synthesis="merge"))
    assert session.status == "completed", session.error
    plan = fake_llm.calls_for(purpose="plan")[0]
    assert "## Your Focus\ndecompose, assign, synthesize" in plan.prompt
    assert "- backend (backend): the backend view" in plan.prompt


def test_a_specialist_the_plan_does_not_assign_is_skipped(acme, fake_llm):
    fake_llm.on(
        purpose="plan",
        replies=Reply(
            json.dumps(
                {
                    "plan": "Only the API matters here.",
                    "assignments": [{"agent": "backend", "subtask": "design the API"}],
                }
            )
        ),
    )
    fake_llm.on(purpose="synthesis", replies=Reply("THE SYNTHESIS"))
    session = run(hierarchical(acme, "coord", "backend", "frontend"))
    assert session.status == "completed", session.error
    assert session.error == ""
    frontend = session.contributions.get(agent_key="frontend")
    assert frontend.status == "skipped"
    assert frontend.response == "" and frontend.subtask == ""
    assert not fake_llm.calls_for(agent="frontend")
    assert "## Your Assignment (from the coordinator)\ndesign the API" in (
        fake_llm.calls_for(agent="backend")[0].prompt
    )
    synthesis_prompt = fake_llm.calls_for(purpose="synthesis")[0].prompt
    assert "### backend (" in synthesis_prompt and "### frontend (" not in synthesis_prompt
    skipped = session.events.get(name="tool:collaborative:agent:skipped")
    assert skipped.data == {"agent": "frontend", "reason": "not in the plan"}
    assert session.metadata["plan"]["unassigned"] == ["frontend"]
    assert session.metadata["agents_completed"] == 2
    assert session.consensus["agents_count"] == 1


def test_the_coordinators_contribution_is_its_plan_text(acme, fake_llm):
    fake_llm.on(
        purpose="plan",
        replies=Reply(
            json.dumps(
                {
                    "plan": "Split by layer: API first, then the UI.",
                    "assignments": [
                        {"agent": "backend", "subtask": "the API"},
                        {"agent": "frontend", "subtask": "the UI"},
                    ],
                }
            )
        ),
    )
    session = run(hierarchical(acme, "coord", "backend", "frontend", synthesis="merge"))
    coordinator = session.contributions.get(agent_key="coord")
    assert coordinator.status == "completed"
    assert coordinator.response == "Split by layer: API first, then the UI."
    assert coordinator.tokens_used > 0


def test_a_plan_without_a_paragraph_contributes_its_assignments(acme, fake_llm):
    fake_llm.on(
        purpose="plan",
        replies=Reply(json.dumps({"assignments": [{"agent": "backend", "subtask": "the API"}]})),
    )
    session = run(hierarchical(acme, "coord", "backend", synthesis="merge"))
    assert session.contributions.get(agent_key="coord").response == "- backend: the API"


def test_a_resumed_sequential_session_briefs_later_agents_with_earlier_answers(acme, fake_llm):
    session = create(acme, mode="sequential", agents=specialists("a", "b"), synthesis="merge")
    CollaborationSession.objects.filter(pk=session.pk).update(
        status="running",
        attempts=1,
        lease_token="dead",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
        started_at=timezone.now(),
    )
    session.contributions.filter(agent_key="a").update(status="completed", response="A-MARKER")
    assert run(session).status == "completed"
    assert not fake_llm.calls_for(agent="a")
    assert "A-MARKER" in fake_llm.calls_for(agent="b")[0].prompt


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


def cancelling_reply(caller, session_ids: dict, text: str = "an answer\nCONFIDENCE: 0.5"):
    """A reply whose text cancels the session as the server answers: the cancel is accepted
    while the agent's call is in flight, well within a heartbeat."""

    def answer(call):
        try:
            session = CollaborationSession.objects.get(pk=session_ids["id"])
            session_cancel(caller=caller, session=session)
        finally:
            connection.close()  # the fake server's thread
        return text

    return Reply(answer)


def test_a_cancel_accepted_before_the_synthesis_starts_spends_nothing_on_it(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(agent="a", replies=cancelling_reply(caller, ids))
    session = create(acme, agents=specialists("a"), synthesis="coordinator")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert not fake_llm.calls_for(purpose="synthesis")
    names = event_names(session)
    assert names[-1] == "cancelled" and "synthesis:start" not in names


def test_a_sequential_session_cancelled_during_an_agent_starts_no_next_agent(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(agent="a", replies=cancelling_reply(caller, ids))
    session = create(acme, mode="sequential", agents=specialists("a", "b"), synthesis="merge")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert not fake_llm.calls_for(agent="b")
    assert session.contributions.get(agent_key="b").status == "cancelled"


def test_a_plan_rejected_after_a_cancel_is_not_asked_for_again(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(purpose="plan", replies=cancelling_reply(caller, ids, "not JSON"))
    session = hierarchical(acme, "coord", "a", "b", synthesis="merge")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert len(fake_llm.calls_for(purpose="plan")) == 1
    assert not fake_llm.calls_for(purpose="agent")
    assert "fallback" not in event_names(session)


def test_a_plan_is_not_asked_again_once_the_session_is_cancelled(acme, fake_llm):
    """The heartbeat sees the cancel while the coordinator's first (rejected) plan is in flight:
    the session ends cancelled, and its orphaned thread makes no second call."""
    fake_llm.on(purpose="plan", replies=Reply("not JSON", hang=True))
    caller = human(acme)
    session = hierarchical(acme, "coord", "a", synthesis="merge", agent_timeout=30)
    thread = threading.Thread(target=lambda: (runner.run_session(session.pk), connection.close()))
    thread.start()
    wait_for(lambda: fake_llm.calls_for(purpose="plan"), timeout=30)
    session_cancel(caller=caller, session=session)
    thread.join(timeout=15)
    session.refresh_from_db()
    assert session.status == "cancelled"
    fake_llm.release()
    wait_for(lambda: fake_llm.calls_for(purpose="plan")[0].answered, timeout=10)
    # A second call would follow the first answer at once; none comes within a second.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert len(fake_llm.calls_for(purpose="plan")) == 1
        time.sleep(0.05)


def test_a_cancelled_session_reports_what_its_agents_spent(acme, fake_llm, org_client):
    fake_llm.on(
        agent="quick", replies=Reply("q\nCONFIDENCE: 0.5", prompt_tokens=30, completion_tokens=12)
    )
    fake_llm.on(agent="slow", replies=Reply(hang=True))
    caller = human(acme)
    session = create(acme, agents=specialists("quick", "slow"), synthesis="merge", agent_timeout=30)
    thread = threading.Thread(target=lambda: (runner.run_session(session.pk), connection.close()))
    thread.start()
    wait_for(lambda: session.contributions.filter(agent_key="quick", status="completed").exists())
    session_cancel(caller=caller, session=session)
    thread.join(timeout=15)
    body = org_client(acme).get(f"/api/collaborations/{session.pk}").json()
    assert body["status"] == "cancelled"
    assert body["metadata"]["total_tokens"] == 42
    assert body["metadata"]["agent_tokens"] == 42
    assert body["metadata"]["agents_completed"] == 1
    assert body["metadata"]["duration_ms"] >= 0
    # The hung call answers late: the ledger booked it, and so do its contribution and the
    # session's metadata (they counted none of it).
    from costs.models import UsageRecord

    fake_llm.release()

    slow = session.contributions.get(agent_key="slow")
    wait_for(
        lambda: (
            UsageRecord.objects.filter(session=session, label="slow", state="recorded").exists()
            and slow.__class__.objects.get(pk=slow.pk).tokens_used > 0
        )
    )
    booked = sum(
        r.prompt_tokens + r.completion_tokens for r in UsageRecord.objects.filter(session=session)
    )
    body = org_client(acme).get(f"/api/collaborations/{session.pk}").json()
    assert (body["status"], body["metadata"]["total_tokens"]) == ("cancelled", booked)
    assert sum(c["tokens_used"] for c in body["contributions"]) == booked
