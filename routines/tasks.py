"""Celery tasks of routines: thin, they take ids and call one service."""

from datetime import UTC, datetime

from celery import shared_task

from .apps import SWEEP_TASK
from .schedule import FIRE_TASK


def _when(expires) -> datetime | None:
    """The message's expiry (Celery's ISO header), aware; None when it has none."""
    if not expires:
        return None
    moment = expires if isinstance(expires, datetime) else datetime.fromisoformat(expires)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@shared_task(bind=True, name=FIRE_TASK, ignore_result=True)
def fire(self, routine: int) -> None:
    """The beat's tick of one routine (its PeriodicTask)."""
    from .services import routine_tick

    routine_tick(routine_id=routine, expires=_when(self.request.expires))


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep() -> None:
    """Missed and held occurrences of every routine (scheduled by django-celery-beat)."""
    from .services import routines_sweep

    routines_sweep()
