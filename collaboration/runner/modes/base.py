"""What a mode decides: the order the agents run in, what each is told, whose answers count."""

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ...models import CollaborationSession, Contribution
from ...synthesis.base import Answer
from ..context import RunContext


@dataclass(frozen=True)
class Brief:
    """What one agent is told beyond the task: earlier answers, its assignment, or a note."""

    previous: tuple[Answer, ...] | list[Answer] = ()
    subtask: str = ""
    note: str = ""


class SessionMode(ABC):
    @abstractmethod
    def run(self, ctx: RunContext, contributions: list[Contribution]) -> None:
        """Run the agents not finished yet (a resumed session skips the others); return when they
        are settled or the session is cancelled."""

    def brief(self, ctx: RunContext, contribution: Contribution) -> Brief:
        return Brief()

    def answering(self, contributions: list[Contribution]) -> list[Contribution]:
        """The contributions whose answers the synthesis combines."""
        return contributions

    def coordinator_of(self, session: CollaborationSession) -> Contribution | None:
        """The agent that coordinates the session (its settings are the coordinator's default)."""
        return None
