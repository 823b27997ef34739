from django.apps import AppConfig
from django.db.models.signals import post_migrate

from .schedules import periodic_seeder

OUTBOX_RELAY_NAME = "Send the outbox"
OUTBOX_RELAY_TASK = "organization.relay_outbox"


ensure_outbox_relay_schedule = periodic_seeder(
    name=OUTBOX_RELAY_NAME, task=OUTBOX_RELAY_TASK, interval_setting="OUTBOX_RELAY_INTERVAL"
)


class OrganizationConfig(AppConfig):
    name = "organization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import schema, tools  # noqa: F401  registers the tools and schema extensions
        from .discovery import signals  # noqa: F401  manifest refresh on commit (seed 002)
        from .discovery import tools as discovery_tools  # noqa: F401  registers discover_experts

        post_migrate.connect(ensure_outbox_relay_schedule, sender=self)
