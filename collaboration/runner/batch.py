"""A batch of agents: at most `parallel` at a time on the pool, each within the agent timeout."""

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, wait

from infrastructure import tracing
from infrastructure.connections import release_connection

from ..models import Contribution, ContributionStatus
from .agent import run_agent, settle
from .context import RunContext, Slot
from .pool import agent_pool, in_agent_thread

POLL_SECONDS = 0.05


def run_batch(
    ctx: RunContext,
    contributions: list[Contribution],
    parallel: int,
    work: Callable[[RunContext, Slot], None] | None = None,
) -> None:
    """Run `contributions` at most `parallel` at a time, each within the session's agent_timeout.
    A timed-out agent is settled at its deadline; its thread keeps its slot until the HTTP call
    gives up, so no more than `parallel` calls are ever in flight."""
    if not contributions:
        return
    work = work or run_agent
    slots = [Slot(c) for c in contributions]
    permits = threading.BoundedSemaphore(parallel)
    for slot in slots:
        # The pool's thread continues this session's trace.
        slot.future = agent_pool().submit(
            tracing.in_context(in_agent_thread), work, ctx, slot, permits
        )
    open_slots = list(slots)
    while open_slots:
        release_connection()  # the session waits on its agents holding none
        wait([s.future for s in open_slots], timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        still_open = []
        for slot in open_slots:
            if slot.future.done():
                continue
            if slot.deadline is not None and now > slot.deadline:
                settle(
                    ctx,
                    slot.contribution,
                    ContributionStatus.TIMED_OUT,
                    error=f"timed out after {ctx.session.agent_timeout:g} s",
                )
                continue
            still_open.append(slot)
        open_slots = still_open
        if ctx.cancelled.is_set() and open_slots:
            # Agents not started yet see the cancel in start and return at once.
            for slot in open_slots:
                settle(
                    ctx,
                    slot.contribution,
                    ContributionStatus.CANCELLED,
                    error="cancelled",
                    from_statuses=(ContributionStatus.PENDING, ContributionStatus.RUNNING),
                )
            break
