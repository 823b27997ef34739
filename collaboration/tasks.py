"""Celery tasks of the collaboration app: thin, they take an id and call the runner (imported in
the task's body, so importing this module stays light and nothing is circular).
"""

from celery import shared_task
from celery.signals import worker_init, worker_process_init
from django.conf import settings
from django.db import connection

from infrastructure.atomic import DATABASE_GONE

from . import providers


@worker_init.connect
@worker_process_init.connect
def _warm_up_providers(**kwargs) -> None:
    providers.warm_up()


@shared_task(
    bind=True,
    name="collaboration.run_session",
    # At-least-once: the message is acked when the session is over, and re-queued if the worker
    # process dies; the runner makes a second run resume instead of repeating work.
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    # Redis' visibility_timeout must exceed this (checked in apps.py), else a live run is re-delivered.
    time_limit=settings.COLLAB_SESSION_TIME_LIMIT,
    soft_time_limit=max(1, settings.COLLAB_SESSION_TIME_LIMIT - 10),
)
def run_collaboration(self, session_id: str) -> str:
    from .runner import BUSY, run_session

    try:
        outcome = run_session(session_id)
    except DATABASE_GONE as exc:
        # The database went away (a restart, a failover): acked as failed, the session would
        # stay "running" with nothing to resume it. Run it again once the database is back.
        connection.close()
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc
    if outcome == BUSY:
        # Another worker holds a live lease on this session: look again once it could have expired.
        raise self.retry(countdown=settings.COLLAB_LEASE_SECONDS)
    return outcome


@shared_task(name="collaboration.sweep_sessions")
def sweep_sessions() -> list:
    from .sweep import sweep_sessions as sweep

    return [str(pk) for pk in sweep()]
