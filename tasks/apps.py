from django.apps import AppConfig
from django.db.models.signals import post_migrate

STALE_SWEEP_NAME = "Escalate stale queued tasks"
STALE_SWEEP_TASK = "tasks.sweep_stale_tasks"


def ensure_stale_sweep_schedule(**kwargs) -> None:
    """Seed the beat schedule once; later edits in the admin are kept (get_or_create, not update)."""
    from django.conf import settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    using = kwargs.get("using", "default")
    seconds = max(int(settings.STALE_CHECK_INTERVAL.total_seconds()), 1)
    interval, _ = IntervalSchedule.objects.using(using).get_or_create(
        every=seconds, period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.using(using).get_or_create(
        name=STALE_SWEEP_NAME,
        defaults={"task": STALE_SWEEP_TASK, "interval": interval},
    )


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import tools  # noqa: F401  registers the task tools

        post_migrate.connect(ensure_stale_sweep_schedule, sender=self)
