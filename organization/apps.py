from django.apps import AppConfig
from django.db.models.signals import post_migrate

OUTBOX_RELAY_NAME = "Send the outbox"
OUTBOX_RELAY_TASK = "organization.relay_outbox"


def ensure_outbox_relay_schedule(**kwargs) -> None:
    """Seed the relay's beat schedule once (organization.schedules)."""
    from django.conf import settings

    from organization.schedules import ensure_periodic_task

    ensure_periodic_task(
        name=OUTBOX_RELAY_NAME,
        task=OUTBOX_RELAY_TASK,
        every=settings.OUTBOX_RELAY_INTERVAL,
        using=kwargs.get("using", "default"),
    )


class OrganizationConfig(AppConfig):
    name = "organization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import schema, tools  # noqa: F401  registers the tools and schema extensions
        from .discovery import signals  # noqa: F401  manifest refresh on commit (seed 002)
        from .discovery import tools as discovery_tools  # noqa: F401  registers discover_experts

        post_migrate.connect(ensure_outbox_relay_schedule, sender=self)
