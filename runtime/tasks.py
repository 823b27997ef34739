"""Celery tasks of the runtime: thin, they take an id and call the runner or the sweep.

Services queue `runtime.run_agent` by name through the outbox; the body imports the runner."""

import random

from celery import shared_task
from django.conf import settings
from django.db import connection

from infrastructure.atomic import DATABASE_GONE

from .apps import SWEEP_RUNS_TASK
from .models import RUN_AGENT_TASK
from .remote_a2a import SEND_TASK, UnderWay, deliver, time_limit


@shared_task(
    bind=True,
    name=RUN_AGENT_TASK,
    # At-least-once: acked when the run is over, re-queued if the worker process dies; the
    # lease makes a second delivery resume the run (or back off while another worker runs it).
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    time_limit=settings.RUNTIME_RUN_TIME_LIMIT,
    soft_time_limit=max(1, settings.RUNTIME_RUN_TIME_LIMIT - 10),
)
def run_agent(self, run_id: int) -> str:
    from .lease import BUSY
    from .runner import WAITING
    from .runner import run_agent as run

    try:
        outcome = run(run_id)
    except DATABASE_GONE as exc:
        # The database went away (a restart, a failover): acked as failed, the run would wait
        # for the sweep. Run it again once the database is back.
        connection.close()
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc
    if outcome == BUSY:
        # Another worker holds a live lease on this run: look again once it could have expired.
        raise self.retry(countdown=settings.RUNTIME_LEASE_SECONDS)
    if outcome == WAITING:
        # Its budgets' money is held by calls under way: try again once they may have settled,
        # doubling up to a lease (the sweep sends again a queued run not sent for a lease), with
        # jitter so that the runs waiting for the same money do not all come back at once.
        backoff = settings.RUNTIME_BUDGET_WAIT_SECONDS * 2 ** min(self.request.retries, 16)
        countdown = min(backoff, settings.RUNTIME_LEASE_SECONDS) * random.uniform(0.5, 1.0)  # noqa: S311
        raise self.retry(countdown=countdown)
    return outcome


@shared_task(
    bind=True,
    name=SEND_TASK,
    # At-least-once, as a run: a delivery whose worker died is taken again, and finds the task
    # in progress (runtime/remote_a2a.py blocks it once no delivery can still be under way).
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    time_limit=time_limit(),
)
def send_to_remote_a2a(self, task_id: int, trigger: str = "") -> str:
    outcome = deliver(task_id, trigger)
    if isinstance(outcome, UnderWay):
        raise self.retry(countdown=outcome.seconds)
    return outcome


@shared_task(name=SWEEP_RUNS_TASK)
def sweep_runs() -> dict:
    from .services import sweep_runs as sweep

    return sweep()
