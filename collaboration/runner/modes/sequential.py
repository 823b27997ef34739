"""`sequential`: one agent after the other, each seeing the answers before it."""

from ...models import Contribution, ContributionStatus
from ...synthesis.base import answers_of
from ..batch import run_batch
from ..context import RunContext
from .base import Brief, SessionMode


class Sequential(SessionMode):
    def run(self, ctx: RunContext, contributions: list[Contribution]) -> None:
        for c in contributions:
            if ctx.cancelled.is_set():
                break
            c.refresh_from_db(fields=["status"])
            if not c.is_finished:
                run_batch(ctx, [c], 1)

    def brief(self, ctx: RunContext, contribution: Contribution) -> Brief:
        previous = answers_of(
            Contribution.objects.filter(
                session=ctx.session,
                position__lt=contribution.position,
                status=ContributionStatus.COMPLETED,
            ).order_by("position")
        )
        return Brief(previous=previous)
