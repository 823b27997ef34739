"""What a synthesis strategy is given (`Answer`s in a `Ballot`, no database, no provider) and what
it gives back (an `Outcome` the runner writes).
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Answer:
    agent: str
    role: str
    response: str
    confidence: float | None = None
    verdict: str = ""
    position: int = 0


def answers_of(contributions) -> list[Answer]:
    """The finished contributions (model rows) as the strategies see them."""
    return [
        Answer(
            agent=c.agent_key,
            role=c.role,
            response=c.response,
            confidence=c.confidence,
            verdict=c.verdict,
            position=c.position,
        )
        for c in contributions
    ]


@dataclass(frozen=True)
class Ballot:
    """The session's task, its completed answers (in order) and their consensus."""

    task: str
    answers: list[Answer]
    consensus: dict
    # Asks the session's coordinator: (purpose, prompt, hints) → its answer's text; raises
    # providers.ProviderError when the call fails (its tokens are counted by the runner).
    ask_coordinator: Callable[[str, str, dict], str]
    # Whether the starter gave a coordinator_config (best_of asks a coordinator only then).
    coordinator_configured: bool = False


@dataclass
class Outcome:
    result: str
    # Merged into the session's metadata.
    extra: dict = field(default_factory=dict)
    # Why the result is a fallback (the session then ends `partial`), else "".
    degraded: str = ""
    # The `fallback` events to record: {"stage", "reason", "action"} each.
    fallbacks: list[dict] = field(default_factory=list)


class Strategy(ABC):
    """Combines a session's answers into its result; one subclass per module, one per key."""

    # The specialists end their answers with a VERDICT line (a vote counts them).
    asks_verdict: ClassVar[bool] = False

    def __init__(self, key: str):
        self.key = key

    @abstractmethod
    def combine(self, ballot: Ballot) -> Outcome:
        """The session's result from its answers (each strategy module defines it)."""
