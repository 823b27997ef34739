from django.apps import AppConfig
from django.db.models.signals import post_migrate

OUTBOX_RELAY_NAME = "Send the outbox"
OUTBOX_RELAY_TASK = "organization.relay_outbox"


def ensure_outbox_relay_schedule(**kwargs) -> None:
    """Seed the relay's beat schedule once, as tasks/apps.py seeds the stale sweep's."""
    from django.conf import settings
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    using = kwargs.get("using", "default")
    seconds = max(int(settings.OUTBOX_RELAY_INTERVAL.total_seconds()), 1)
    interval, _ = IntervalSchedule.objects.using(using).get_or_create(
        every=seconds, period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.using(using).get_or_create(
        name=OUTBOX_RELAY_NAME,
        defaults={"task": OUTBOX_RELAY_TASK, "interval": interval},
    )


class OrganizationConfig(AppConfig):
    name = "organization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (  # noqa: F401  registers the tools and schema extensions
            schema,
            signals,  # noqa: F401  manifest refresh on commit + discover_experts (seed 002)
            tools,
        )

        post_migrate.connect(ensure_outbox_relay_schedule, sender=self)
