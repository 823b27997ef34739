"""`coordinator`: a coordinator model writes the synthesis (seed 004's prompt); if its call
fails, the answers are merged and the session ends partial."""

from collaboration.providers.base import ProviderError, Purpose

from .base import Ballot, Outcome, Strategy
from .merge import merge_result
from .parsing import first_sentence
from .prompts import synthesis_prompt


class Coordinator(Strategy):
    def combine(self, ballot: Ballot) -> Outcome:
        hints = {
            "contributions": [
                {"agent": a.agent, "summary": first_sentence(a.response)} for a in ballot.answers
            ]
        }
        try:
            text = ballot.ask_coordinator(
                Purpose.SYNTHESIS, synthesis_prompt(ballot.task, ballot.answers), hints
            )
        except ProviderError as exc:
            return Outcome(
                result=merge_result(ballot.answers),
                degraded=f"coordinator synthesis failed: {exc}",
                fallbacks=[{"stage": Purpose.SYNTHESIS, "reason": str(exc), "action": "merge"}],
            )
        return Outcome(result=text)
