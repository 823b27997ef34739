"""Beat schedules the apps seed on migrate (django-celery-beat's database scheduler)."""

from datetime import timedelta


def ensure_periodic_task(*, name: str, task: str, every: timedelta, using: str = "default") -> None:
    """Seed one periodic task once; later edits in the admin are kept (get_or_create, not update)."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    interval, _ = IntervalSchedule.objects.using(using).get_or_create(
        every=max(int(every.total_seconds()), 1), period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.using(using).get_or_create(
        name=name, defaults={"task": task, "interval": interval}
    )
