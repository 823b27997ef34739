"""`parallel`: every agent at once, at most max_parallel at a time."""

from ...models import Contribution
from ..batch import run_batch
from ..context import RunContext
from .base import SessionMode


class Parallel(SessionMode):
    def run(self, ctx: RunContext, contributions: list[Contribution]) -> None:
        pending = [c for c in contributions if not c.is_finished]
        run_batch(ctx, pending, ctx.session.max_parallel)
