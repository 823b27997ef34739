"""Pure synthesis functions: parsing, normalising, agreement."""

import pytest

from collaboration.synthesis.base import Answer
from collaboration.synthesis.consensus import consensus_of
from collaboration.synthesis.parsing import (
    normalise_verdict,
    parse_confidence,
    parse_plan,
    parse_verdict,
)
from collaboration.synthesis.vote import vote_result


@pytest.mark.parametrize(
    "raw, verdict",
    [
        ("Approve", "yes"),
        ("**LGTM**", "yes"),
        ("No.", "no"),
        ("reject — too risky", "no"),
        ("Monolith", "monolith"),
        ("  Microservices, for scale", "microservices"),
    ],
)
def test_verdicts_are_normalised(raw, verdict):
    assert normalise_verdict(raw) == verdict


def test_the_last_verdict_and_confidence_lines_count():
    text = "VERDICT: no\nthinking again\n**VERDICT:** yes\nCONFIDENCE: 85%\n"
    assert parse_verdict(text) == "yes"
    assert parse_confidence(text) == 0.85
    assert parse_confidence("CONFIDENCE: 0.4") == 0.4
    assert parse_confidence("CONFIDENCE: 7") == 0.07
    assert parse_confidence("no line") is None


@pytest.mark.parametrize(
    "line, confidence",
    [
        ("CONFIDENCE: 8/10", 0.8),
        ("Confidence: 4 out of 5", 0.8),
        ("CONFIDENCE: **9 / 10**", 0.9),
        ("CONFIDENCE: 0.7/1", 0.7),
        ("CONFIDENCE: 80% / 100", 0.8),
    ],
)
def test_a_confidence_given_on_a_scale_is_read_on_that_scale(line, confidence):
    """A vote's tie-break and best_of rank by confidence: "8/10" is 0.8, not 8 %."""
    assert parse_confidence(f"My answer.\n{line}") == pytest.approx(confidence)


def test_agreement_without_verdicts_is_word_overlap():
    same = "postgres indexes vacuum replication"
    result = consensus_of([Answer("a", "r", same), Answer("b", "r", same)])
    assert result["method"] == "jaccard_word_overlap"
    assert result["agreement_score"] == 1.0 and result["has_consensus"] is True
    apart = consensus_of(
        [Answer("a", "r", "kubernetes helm charts"), Answer("b", "r", "figma typography colours")]
    )
    assert apart["agreement_score"] == 0.0 and apart["has_consensus"] is False
    assert apart["key_disagreements"][0].startswith("only a raises: ")


def test_a_plan_is_parsed_from_a_fence_and_validated():
    plan, why = parse_plan(
        'Sure!\n```json\n{"assignments": [{"agent": "x", "subtask": "s"}]}\n```', ["x"]
    )
    assert plan == {"plan": "", "assignments": {"x": "s"}} and why == ""
    assert parse_plan('{"assignments": [{"agent": "x", "subtask": ""}]}', ["x"])[0] is None
    assert (
        parse_plan("[1, 2]", ["x"])[1] == 'The plan must be an object with an "assignments" list.'
    )


def votes(*items) -> list[Answer]:
    return [
        Answer(agent, "r", f"{agent} thinks so", confidence=c, verdict=v, position=i)
        for i, (agent, v, c) in enumerate(items)
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"assignments": [{"agent": "a", "subtask": "x"}], "n": ' + "1" * 5000 + "}",
        '{"assignments": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["number_too_long", "nested_too_deep"],
)
def test_a_plan_python_cannot_parse_is_rejected_with_a_reason(text):
    """A model's answer is untrusted: it is rejected (and the plan asked for again), never a
    crash of the coordinator."""
    plan, why = parse_plan(text, ["a"])
    assert plan is None and why.startswith("The plan is not JSON")


def test_a_tie_broken_by_order_says_so():
    answers = votes(("a", "no", 0.5), ("b", "yes", 0.5))
    consensus = consensus_of(answers)
    assert consensus["decided_by"] == "order_tie_break"
    result = vote_result(answers, consensus)
    assert "majority" not in result.lower()
    assert result.startswith(
        "## Consensus (none: the vote is tied)\n- no / yes: 1 of 2 agents each"
    )
    assert (
        "## Conclusion (tie broken by order)\nVERDICT: no — tied at 1 of 2 agents each with "
        "equal confidence; the earliest agent's verdict decided." in result
    )


def test_a_real_majority_keeps_the_seeds_wording():
    answers = votes(("a", "yes", 0.9), ("b", "yes", 0.5), ("c", "no", 0.99))
    consensus = consensus_of(answers)
    assert consensus["decided_by"] == "majority"
    result = vote_result(answers, consensus)
    assert result.startswith("## Consensus (1 point)\n- 2 of 3 agents: yes (a, b)")
    assert "## Majority Conclusion\nVERDICT: yes — 2 of 3 agents (67%)" in result
