"""`merge`: every answer, one section per agent (seed 004)."""

from .base import Answer, Ballot, Outcome, Strategy


def merge_result(answers: list[Answer]) -> str:
    """Seed 004's merge: one section per agent."""
    return "\n\n---\n\n".join(f"### {a.agent} ({a.role})\n\n{a.response}" for a in answers)


class Merge(Strategy):
    def combine(self, ballot: Ballot) -> Outcome:
        return Outcome(result=merge_result(ballot.answers))
