"""`hierarchical`: the first agent plans (runner/plan.py), the specialists run their subtasks in
parallel, and only their answers are synthesized.
"""

from ...models import CollaborationSession, Contribution, ContributionStatus
from ..batch import run_batch
from ..context import RunContext
from ..plan import ensure_plan_outcome, run_plan
from .base import Brief, SessionMode

WHOLE_TASK_NOTE = (
    "The coordinator's plan could not be used: work on the whole task from your perspective."
)


class Hierarchical(SessionMode):
    def run(self, ctx: RunContext, contributions: list[Contribution]) -> None:
        coordinator, specialists = contributions[0], contributions[1:]
        coordinator.refresh_from_db(fields=["status"])
        if not coordinator.is_finished:
            run_batch(ctx, [coordinator], 1, work=run_plan)
        ensure_plan_outcome(ctx, coordinator)
        if not ctx.cancel_seen():
            pending = (
                Contribution.objects.filter(
                    pk__in=[s.pk for s in specialists], status=ContributionStatus.PENDING
                )
                .select_related("agent")
                .order_by("position")
            )
            run_batch(ctx, list(pending), ctx.session.max_parallel)

    def brief(self, ctx: RunContext, contribution: Contribution) -> Brief:
        # A valid plan skips the specialists it leaves out, so no subtask means the fallback.
        if contribution.subtask:
            return Brief(subtask=contribution.subtask)
        return Brief(note=WHOLE_TASK_NOTE)

    def answering(self, contributions: list[Contribution]) -> list[Contribution]:
        return contributions[1:]

    def coordinator_of(self, session: CollaborationSession) -> Contribution | None:
        return session.contributions.select_related("agent").order_by("position").first()
