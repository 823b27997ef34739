"""How a run's answers are synthesized: vote, best_of, merge and the coordinator's synthesis."""

import pytest

from tests.collaboration.conftest import run, specialists
from tests.collaboration.starts import create, hierarchical
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


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
