"""`best_of`: the most confident answer; a tie goes to the coordinator's judgement when one is
configured, else to the earliest agent."""

from collaboration.providers.base import ProviderError, Purpose

from .base import Answer, Ballot, Outcome, Strategy
from .parsing import parse_best
from .prompts import judge_prompt


def best_of_candidates(answers: list[Answer]) -> list[Answer]:
    """The answers sharing the highest confidence (all of them when none reported one)."""
    rated = [a for a in answers if a.confidence is not None]
    if not rated:
        return list(answers)
    top = max(a.confidence for a in rated)
    return [a for a in rated if a.confidence == top]


def best_of_result(chosen: Answer, total: int, how: str) -> str:
    conf = f", confidence {chosen.confidence:.2f}" if chosen.confidence is not None else ""
    return f"## Best of {total}: {chosen.agent} ({chosen.role}{conf}; {how})\n\n{chosen.response}"


class BestOf(Strategy):
    def combine(self, ballot: Ballot) -> Outcome:
        """Highest confidence; a tie goes to a coordinator judgement when configured, else the earliest."""
        candidates = best_of_candidates(ballot.answers)
        chosen, how, fallbacks = None, "highest confidence", []
        if len(candidates) > 1:
            if ballot.coordinator_configured:
                names = [a.agent for a in candidates]
                try:
                    text = ballot.ask_coordinator(
                        Purpose.JUDGE, judge_prompt(ballot.task, candidates), {"candidates": names}
                    )
                    picked = parse_best(text, names)
                    chosen = next((a for a in candidates if a.agent == picked), None)
                    how = "tie broken by the coordinator"
                except ProviderError as exc:
                    fallbacks.append({"stage": self.key, "reason": str(exc), "action": "earliest"})
            if chosen is None:
                chosen = min(candidates, key=lambda a: a.position)
                how = "tie broken by order: the earliest"
        else:
            chosen = candidates[0]
        info = {
            "agent": chosen.agent,
            "confidence": chosen.confidence,
            "how": how,
            "tied": [a.agent for a in candidates] if len(candidates) > 1 else [],
        }
        return Outcome(
            result=best_of_result(chosen, len(ballot.answers), how),
            extra={"best_of": info},
            fallbacks=fallbacks,
        )
