"""How far the answers agree: the verdict majority (and how a tie is decided), else word overlap;
`consensus_of` is seed 004's consensus object, carried by every strategy's session.
"""

import re
from collections import Counter
from itertools import combinations

from .base import Answer

WORD_RE = re.compile(r"[a-z][a-z0-9'-]{3,}")
# Words too common to say anything about agreement.
STOPWORDS = frozenset(
    """
    about above after again also because been before being below between both could does doing
    down during each from further have having here into itself just more most once only other
    over same should some such than that their them then there these they this those through
    under until very were what when where which while will with would your yours offline
    provider verdict confidence
    """.split()
)
# Without verdicts, agreement is the mean pairwise Jaccard similarity of the answers' word sets;
# above this the agents are said to agree (two unrelated texts typically score under 0.1).
TEXT_CONSENSUS_THRESHOLD = 0.3


def words_of(text: str) -> set[str]:
    return {w for w in WORD_RE.findall((text or "").lower()) if w not in STOPWORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


# How a vote was decided: by the most votes, or, between verdicts with as many votes, by the
# higher summed confidence, then by the earliest agent.
MAJORITY, CONFIDENCE_TIE_BREAK, ORDER_TIE_BREAK = (
    "majority",
    "confidence_tie_break",
    "order_tie_break",
)


def confidence_of(answers: list[Answer], verdict: str) -> float:
    return sum(a.confidence or 0 for a in answers if a.verdict == verdict)


def vote_decision(answers: list[Answer]) -> tuple[str, Counter, str]:
    """(winning verdict, tally, how it was decided); ('', empty, '') when nobody voted."""
    voted = [a for a in answers if a.verdict]
    tally = Counter(a.verdict for a in voted)
    if not tally:
        return "", tally, ""

    def rank(verdict: str):
        first = min(a.position for a in voted if a.verdict == verdict)
        return (tally[verdict], confidence_of(voted, verdict), -first)

    winner = max(tally, key=rank)
    tied = [v for v in tally if tally[v] == tally[winner]]
    if len(tied) == 1:
        return winner, tally, MAJORITY
    weights = [confidence_of(voted, v) for v in tied]
    decided = CONFIDENCE_TIE_BREAK if weights.count(max(weights)) == 1 else ORDER_TIE_BREAK
    return winner, tally, decided


def consensus_of(answers: list[Answer]) -> dict:
    """Seed 004's consensus object, computed for real (the seed's is a placeholder)."""
    result = {
        "agents_count": len(answers),
        "has_consensus": False,
        "agreement_score": None,
        "key_agreements": [],
        "key_disagreements": [],
        "method": None,
    }
    if not answers:
        return result
    majority, tally, decided_by = vote_decision(answers)
    if tally:
        voted = sum(tally.values())
        score = tally[majority] / voted
        result.update(
            method="verdict_majority",
            decided_by=decided_by,
            agreement_score=round(score, 3),
            has_consensus=score > 0.5,
            majority_verdict=majority,
            verdicts=dict(tally),
            key_agreements=[
                f"{tally[majority]} of {voted} agents: {majority} "
                f"({', '.join(a.agent for a in answers if a.verdict == majority)})"
            ],
            key_disagreements=[
                f"{a.agent} ({a.role}): {a.verdict or 'no verdict'}"
                for a in answers
                if a.verdict != majority
            ],
        )
        return result
    sets = [words_of(a.response) for a in answers]
    if len(answers) == 1:
        score = 1.0
    else:
        pairs = list(combinations(range(len(sets)), 2))
        score = sum(jaccard(sets[i], sets[j]) for i, j in pairs) / len(pairs)
    counts = Counter(w for s in sets for w in s)
    need = len(sets) // 2 + 1
    shared = sorted((w for w, n in counts.items() if n >= need), key=lambda w: (-counts[w], w))
    result.update(
        method="jaccard_word_overlap",
        threshold=TEXT_CONSENSUS_THRESHOLD,
        agreement_score=round(score, 3),
        has_consensus=score >= TEXT_CONSENSUS_THRESHOLD,
        key_agreements=[f"shared by {counts[w]} of {len(sets)} agents: {w}" for w in shared[:8]]
        if len(sets) > 1
        else [],
        key_disagreements=[
            f"only {a.agent} raises: {', '.join(sorted(s - set().union(*(o for o in sets if o is not s)))[:5])}"
            for a, s in zip(answers, sets, strict=True)
            if len(sets) > 1 and s - set().union(*(o for o in sets if o is not s))
        ],
    )
    return result
