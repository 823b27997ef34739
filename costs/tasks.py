"""Celery tasks of the costs app (thin: the work is in metering and budgets)."""

from celery import shared_task

from .apps import SWEEP_RESERVATIONS_TASK


@shared_task(name=SWEEP_RESERVATIONS_TASK, ignore_result=True)
def sweep_reservations() -> dict:
    """Book the reservations their workers never settled; on a new month, wake who waited."""
    from .budgets import new_month_wake
    from .metering import sweep_expired

    return {"expired": sweep_expired(), "organizations_woken": new_month_wake()}
