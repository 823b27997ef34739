"""The issue's figures: bounded parallelism with a hung agent, a truncated plan, wall time."""

import pytest

from tests.collaboration.conftest import event_names, run, specialists
from tests.collaboration.starts import started
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_six_agents_max_parallel_3_one_hung_agent(acme, fake_llm, settings):
    settings.COLLAB_MAX_AGENTS = 6
    names = ["hung", "b", "c", "d", "e", "f"]
    fake_llm.on(agent="hung", replies=Reply(hang=True))
    fake_llm.on(purpose="agent", replies=Reply("an answer\nCONFIDENCE: 0.5", delay=0.2))
    session = run(started(acme, specialists(*names), max_parallel=3, agent_timeout=2))
    hung = session.contributions.get(agent_key="hung")
    assert hung.status == "timed_out"
    assert hung.error.startswith("timed out after 2 s") or "time ran out" in hung.error
    assert (hung.finished_at - hung.started_at).total_seconds() <= 2 + 1
    assert fake_llm.peak_concurrency <= 3
    assert session.metadata["peak_parallel"] == 3
    assert session.status == "partial"
    others = session.contributions.exclude(agent_key="hung")
    assert {c.status for c in others} == {"completed"}
    synthesis = fake_llm.calls_for(purpose="synthesis")[0]
    assert all(f"### {n} (" in synthesis.prompt for n in names[1:])
    assert "### hung (" not in synthesis.prompt
    assert session.consensus["agents_count"] == 5
    assert len(fake_llm.calls_for(agent="hung")) == 1


def test_parallel_agents_run_at_the_same_time(acme, fake_llm):
    """Their wall time approaches the slowest agent's: every one started before any finished
    (structure, not a timer: a loaded machine stretches the times, not their order)."""
    for name, delay in {"a": 0.5, "b": 0.6, "c": 0.8}.items():
        fake_llm.on(agent=name, replies=Reply(f"answer {name}", delay=delay))
    session = run(started(acme, specialists("a", "b", "c"), synthesis="merge"))
    assert session.status == "completed"
    contributions = list(session.contributions.all())
    assert max(c.started_at for c in contributions) < min(c.finished_at for c in contributions)
    assert fake_llm.peak_concurrency == 3


def test_a_truncated_plan_is_retried_once_then_falls_back(acme, fake_llm):
    truncated = '{"plan": "split it", "assignments": [{"agent": "backend", "subtask": "the A'
    fake_llm.on(purpose="plan", replies=Reply(truncated))
    team = specialists("coord", "backend", "frontend")
    session = run(started(acme, team, task="Build the payments service", mode="hierarchical"))
    assert session.status == "completed", session.error
    assert len(fake_llm.calls_for(purpose="plan")) == 2
    retry = fake_llm.calls_for(purpose="plan")[1]
    assert "## Your previous answer was rejected\nThe plan is not valid JSON" in retry.prompt
    fallback = session.events.get(name="tool:collaborative:fallback")
    assert fallback.data["stage"] == "plan"
    assert fallback.data["action"] == "every specialist gets the whole task"
    assert session.metadata["plan"]["fallback"] is True
    for name in ("backend", "frontend"):
        call = fake_llm.calls_for(agent=name)[0]
        assert "## Task\nBuild the payments service" in call.prompt
        assert "The coordinator's plan could not be used" in call.prompt
    assert event_names(session)[-1] == "complete"


def test_a_plan_naming_strangers_is_rejected_then_a_valid_one_is_used(acme, fake_llm):
    fake_llm.on(
        purpose="plan",
        replies=[
            Reply('{"assignments": [{"agent": "mallory", "subtask": "x"}]}'),
            Reply(
                '```json\n{"plan": "p", "assignments": [{"agent": "backend", "subtask": "do B"}]}\n```'
            ),
        ],
    )
    session = run(started(acme, specialists("coord", "backend", "frontend"), mode="hierarchical"))
    assert session.status == "completed"
    assert session.metadata["plan"]["valid"] is True and session.metadata["plan"]["tries"] == 2
    assert session.metadata["plan"]["unassigned"] == ["frontend"]
    assert (
        "## Your Assignment (from the coordinator)\ndo B"
        in fake_llm.calls_for(agent="backend")[0].prompt
    )
    assert session.contributions.get(agent_key="frontend").status == "skipped"
    assert not fake_llm.calls_for(agent="frontend")
    assert "fallback" not in event_names(session)


def test_an_empty_plan_falls_back(acme, fake_llm):
    fake_llm.on(purpose="plan", replies=Reply('{"plan": "nothing", "assignments": []}'))
    session = run(started(acme, specialists("coord", "x"), mode="hierarchical"))
    assert session.status == "completed"
    assert session.metadata["plan"]["reason"] == "The plan assigns nothing to anyone."
    assert "fallback" in event_names(session)


def test_a_failed_coordinator_leaves_the_fallback_plan(acme, fake_llm):
    fake_llm.on(purpose="plan", replies=Reply(status=400))
    team = specialists("coord", "x", "y")
    session = run(started(acme, team, task="Build it", mode="hierarchical"))
    assert session.status == "partial"
    assert session.contributions.get(agent_key="coord").status == "failed"
    plan = session.metadata["plan"]
    assert plan["valid"] is False and plan["fallback"] is True and plan["tries"] == 0
    assert plan["reason"].startswith("the coordinator failed: ")
    fallback = session.events.get(name="tool:collaborative:fallback")
    assert fallback.data["stage"] == "plan"
    assert fallback.data["reason"] == plan["reason"]
    for name in ("x", "y"):
        assert session.contributions.get(agent_key=name).status == "completed"
        assert (
            "The coordinator's plan could not be used" in fake_llm.calls_for(agent=name)[0].prompt
        )
