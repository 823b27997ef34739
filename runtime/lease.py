"""Claim and lease: one worker runs a run at a time, and a run whose worker died is resumed.

Every write of a run is conditioned on its lease token; one thread per process renews them."""

import logging
import threading

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from infrastructure.prepared import update_where

from . import sql
from .models import Run, RunStatus
from .services import held_for_budget

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 1.0

# What a delivery of the run task found.
CLAIMED, MISSING, FINISHED, BUSY, HELD = "claimed", "missing", "finished", "busy", "held"


def claim(run_id: int, token: str) -> tuple[str, Run | None]:
    """Take the run's lease; returns the outcome and, when CLAIMED, the run (its agent read
    with it). A run of a paused agent is HELD: it stays queued until the agent is resumed; so
    is one of an agent out of budget, until the budget makes room (`wake_after_budget`)."""
    with transaction.atomic():
        run = sql.locked_run(run_id)
        if run is None:
            return MISSING, None
        if run.is_finished:
            return FINISHED, None
        now = timezone.now()
        if (
            run.lease_token
            and run.heartbeat_at
            and (now - run.heartbeat_at).total_seconds() < settings.RUNTIME_LEASE_SECONDS
        ):
            return BUSY, None
        if run.status == RunStatus.QUEUED and (
            run.agent.is_paused or (run.any_budget and held_for_budget(run.agent))
        ):
            return HELD, None
        run.attempts += 1
        run.lease_token = token
        run.heartbeat_at = now
        run.started_at = run.started_at or now
        run.status = RunStatus.RUNNING
        run.error = ""  # a queued run's only error says why it waited (for budget headroom)
        update_where(
            Run,
            {"pk": run.pk},
            attempts=run.attempts,
            lease_token=run.lease_token,
            heartbeat_at=run.heartbeat_at,
            started_at=run.started_at,
            status=run.status,
            error=run.error,
        )
    return CLAIMED, run


class Heartbeats:
    """The leases this process holds, renewed by one thread (one UPDATE a second for all)."""

    def __init__(self):
        self._tokens: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, token: str) -> None:
        with self._lock:
            self._tokens.add(token)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._beat, daemon=True, name="runtime-heartbeat"
                )
                self._thread.start()

    def release(self, token: str) -> None:
        with self._lock:
            self._tokens.discard(token)

    def _beat(self) -> None:
        while True:
            threading.Event().wait(HEARTBEAT_SECONDS)
            with self._lock:
                tokens = list(self._tokens)
                if not tokens:
                    self._thread = None
                    return
            try:
                Run.objects.filter(lease_token__in=tokens).update(heartbeat_at=timezone.now())
            except Exception:  # a database hiccup must not stop the renewals
                log.exception("runtime heartbeat failed")
            finally:
                # Not kept between beats: the pool (or a new connection) serves the next one,
                # and a test database can be dropped once the runs are over.
                connection.close()


heartbeats = Heartbeats()
