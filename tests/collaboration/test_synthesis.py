"""Pure synthesis functions: parsing, normalising, agreement."""

import pytest

from collaboration.synthesis import (
    Answer,
    consensus_of,
    normalise_verdict,
    parse_confidence,
    parse_plan,
    parse_verdict,
)


@pytest.mark.parametrize(
    "raw, verdict",
    [("Approve", "yes"), ("**LGTM**", "yes"), ("No.", "no"), ("reject — too risky", "no"),
     ("Monolith", "monolith"), ("  Microservices, for scale", "microservices")],
)  # fmt: skip
def test_verdicts_are_normalised(raw, verdict):
    assert normalise_verdict(raw) == verdict


def test_the_last_verdict_and_confidence_lines_count():
    text = "VERDICT: no\nthinking again\n**VERDICT:** yes\nCONFIDENCE: 85%\n"
    assert parse_verdict(text) == "yes"
    assert parse_confidence(text) == 0.85
    assert parse_confidence("CONFIDENCE: 0.4") == 0.4
    assert parse_confidence("CONFIDENCE: 7") == 0.07
    assert parse_confidence("no line") is None


def test_agreement_without_verdicts_is_word_overlap():
    same = "postgres indexes vacuum replication"
    result = consensus_of([Answer("a", "r", same), Answer("b", "r", same)])
    assert result["method"] == "jaccard_word_overlap"
    assert result["agreement_score"] == 1.0 and result["has_consensus"] is True
    apart = consensus_of([Answer("a", "r", "kubernetes helm charts"),
                          Answer("b", "r", "figma typography colours")])  # fmt: skip
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
