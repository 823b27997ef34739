"""The wake-ups: `work_reached_agent`, sent once the transaction that reached the agents commits.

What one transaction announces is sent together (`WakeBatch`): an agent that many tasks reach at
once is woken once for all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, transaction

from organization.models import Agent

from .models import Task, TaskEvent
from .signals import WAKING_KINDS, work_reached_agent

log = logging.getLogger(__name__)


def announce(reached: Iterable[tuple[Agent, str, Task]], *, event: TaskEvent | None = None) -> None:
    """Send `work_reached_agent` for each (agent, inbox kind, task) that asks its agent to act.

    Sent once the transaction commits, and not at all while nobody listens; `event` is the audit
    row that reached them (after the commit it tells whether its savepoint was undone).
    """
    if not work_reached_agent.has_listeners(Task):
        return
    waking = [(agent, kind, task) for agent, kind, task in reached if kind in WAKING_KINDS]
    if not waking:
        return
    if not connection.in_atomic_block:
        _send_all(waking)  # autocommit: committed already
        return
    batch = WakeBatch.of_this_transaction()
    in_savepoint = event is not None and connection.savepoint_ids
    first = batch.add(waking, event_id=event.pk if in_savepoint else None)
    transaction.on_commit(partial(batch.send, first), robust=True)


class WakeBatch:
    """The wake-ups one transaction announced, sent by the first of their commit hooks to run.

    A wake-up announced in a savepoint that was undone is dropped: a batch checks, in one query,
    that the audit rows of its announces made inside savepoints exist.
    """

    def __init__(self, hooks: list):
        self.hooks = hooks  # the connection's commit hooks when the batch began
        self.reached: list[tuple[Agent, str, Task, int | None]] = []
        self.sent = False

    @classmethod
    def of_this_transaction(cls) -> WakeBatch:
        # Django replaces its list of commit hooks when a transaction ends (commit or rollback)
        # and when a savepoint is undone: a batch made under another list is not this one's.
        batch = getattr(connection, "agent_org_wake_batch", None)
        if batch is None or batch.sent or batch.hooks is not connection.run_on_commit:
            batch = connection.agent_org_wake_batch = cls(connection.run_on_commit)
        return batch

    def add(self, waking: list[tuple[Agent, str, Task]], *, event_id: int | None) -> int:
        """Add an announce's wake-ups; returns where they start in the batch."""
        first = len(self.reached)
        self.reached += [(agent, kind, task, event_id) for agent, kind, task in waking]
        return first

    def send(self, first: int) -> None:
        if self.sent:
            return
        self.sent = True
        reached = self.reached[first:]
        if len(reached) > 1:
            unsure = {e for *_, e in reached if e is not None}
            if unsure:
                kept = set(TaskEvent.objects.filter(pk__in=unsure).values_list("pk", flat=True))
                reached = [r for r in reached if r[3] is None or r[3] in kept]
        waking = [(agent, kind, task) for agent, kind, task, _ in reached]
        if len(waking) <= 1:
            _send_all(waking)
            return
        try:
            # The agents' rows are locked in one order by every batch: no two batches deadlock.
            with transaction.atomic():
                _send_all(sorted(waking, key=lambda r: r[0].pk))
        except DatabaseError:
            # Its commit failed (the receivers' own errors are caught by send_robust): nothing
            # of it was written, so each goes on its own, as a single announce does.
            log.warning(
                "a batch of %d wake-ups failed to commit; sending each", len(waking), exc_info=True
            )
            _send_all(waking)


def _send_all(waking: list[tuple[Agent, str, Task]]) -> None:
    for agent, kind, task in waking:
        work_reached_agent.send_robust(Task, agent=agent, trigger=kind, task=task)


def announce_batch(reached: Iterable[tuple[Agent, str, int]]) -> None:
    """`announce` for a batch of (agent, inbox kind, task id), with one commit hook for all.

    Each task goes as a deferred instance (its id only): most receivers read nothing else.
    """
    if not work_reached_agent.has_listeners(Task):
        return
    waking = [(agent, kind, task_id) for agent, kind, task_id in reached if kind in WAKING_KINDS]
    if waking:
        transaction.on_commit(partial(_send_each, waking))


def _send_each(reached: list[tuple[Agent, str, int]]) -> None:
    for agent, kind, task_id in reached:
        task = Task.from_db(DEFAULT_DB_ALIAS, ["id"], [task_id])
        work_reached_agent.send_robust(Task, agent=agent, trigger=kind, task=task)
