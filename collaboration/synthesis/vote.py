"""`vote`: the specialists end with a VERDICT line; the majority's conclusion, ties explained."""

from .base import Answer, Ballot, Outcome, Strategy
from .consensus import CONFIDENCE_TIE_BREAK, MAJORITY, ORDER_TIE_BREAK, confidence_of, vote_decision
from .parsing import first_sentence


def vote_result(answers: list[Answer], consensus: dict) -> str:
    """Consensus points, divergent views and the conclusion: the majority's, or a tie's."""
    majority, tally, decided_by = vote_decision(answers)
    tied = sorted(v for v in tally if tally[v] == tally[majority]) if tally else []
    if len(tied) > 1:
        # A tie is no consensus, whatever the tie-break then picks.
        lines = ["## Consensus (none: the vote is tied)"]
        lines.append(
            f"- {' / '.join(tied)}: {tally[majority]} of {sum(tally.values())} agents each"
        )
    else:
        points = len(consensus["key_agreements"])
        lines = [f"## Consensus ({points} point{'' if points == 1 else 's'})"]
        lines += [f"- {p}" for p in consensus["key_agreements"]] or ["- none"]
    lines.append("")
    lines.append("## Divergent Views")
    divergent = [a for a in answers if a.verdict != majority] if tally else []
    if divergent:
        for a in divergent:
            conf = f", confidence {a.confidence:.2f}" if a.confidence is not None else ""
            lines.append(
                f"- {a.agent} ({a.role}): {a.verdict or 'no verdict'}{conf} — {first_sentence(a.response)}"
            )
    elif consensus["key_disagreements"]:
        lines += [f"- {d}" for d in consensus["key_disagreements"]]
    else:
        lines.append("- none")
    lines.append("")
    if decided_by == CONFIDENCE_TIE_BREAK:
        others = ", ".join(f"{v} {confidence_of(answers, v):.2f}" for v in tied if v != majority)
        lines.append("## Conclusion (tie broken by confidence)")
        lines.append(
            f"VERDICT: {majority} — tied at {tally[majority]} of {sum(tally.values())} agents "
            f"each; the higher summed confidence decided ({majority} "
            f"{confidence_of(answers, majority):.2f} against {others})."
        )
    elif decided_by == ORDER_TIE_BREAK:
        lines.append("## Conclusion (tie broken by order)")
        lines.append(
            f"VERDICT: {majority} — tied at {tally[majority]} of {sum(tally.values())} agents "
            "each with equal confidence; the earliest agent's verdict decided."
        )
    else:
        lines.append("## Majority Conclusion")
    if tally:
        backers = [a for a in answers if a.verdict == majority]
        if decided_by == MAJORITY:
            voted = sum(tally.values())
            confidences = [a.confidence for a in backers if a.confidence is not None]
            mean = (
                f", mean confidence {sum(confidences) / len(confidences):.2f}"
                if confidences
                else ""
            )
            lines.append(
                f"VERDICT: {majority} — {tally[majority]} of {voted} agents "
                f"({tally[majority] / voted:.0%}){mean}."
            )
        lines += [f"- {a.agent}: {first_sentence(a.response)}" for a in backers]
    else:
        lines.append("No agent gave a VERDICT line, so there is no majority to report.")
    return "\n".join(lines)


class Vote(Strategy):
    asks_verdict = True

    def combine(self, ballot: Ballot) -> Outcome:
        return Outcome(result=vote_result(ballot.answers, ballot.consensus))
