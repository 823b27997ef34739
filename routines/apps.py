from django.apps import AppConfig
from django.db.models.signals import post_migrate

from organization.schedules import periodic_seeder

SWEEP_NAME = "Handle missed and held routine occurrences"
SWEEP_TASK = "routines.sweep"

ensure_routines_sweep_schedule = periodic_seeder(
    name=SWEEP_NAME, task=SWEEP_TASK, interval_setting="ROUTINES_SWEEP_INTERVAL"
)


class RoutinesConfig(AppConfig):
    name = "routines"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(ensure_routines_sweep_schedule, sender=self)
