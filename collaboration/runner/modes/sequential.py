"""`sequential`: one agent after the other, each seeing the answers before it."""

from ...models import Contribution, ContributionStatus
from ...synthesis.base import answers_of
from ..batch import run_batch
from ..context import RunContext
from .base import Brief, SessionMode


class Sequential(SessionMode):
    def run(self, ctx: RunContext, contributions: list[Contribution]) -> None:
        # `contributions` were read after the claim (a resumed run's included): their statuses
        # are current, and `start` claims each one conditionally all the same.
        for c in contributions:
            if c.is_finished:
                continue
            if ctx.cancel_seen():
                break
            run_batch(ctx, [c], 1)

    def brief(self, ctx: RunContext, contribution: Contribution) -> Brief:
        # The session's contributions as read after the claim, each kept in step with its row
        # as it settles: no query per agent.
        previous = answers_of(
            c
            for c in ctx.contributions
            if c.position < contribution.position and c.status == ContributionStatus.COMPLETED
        )
        return Brief(previous=previous)
