from django.apps import AppConfig
from django.db.models.signals import post_migrate

from organization.schedules import periodic_seeder

SWEEP_NAME = "Book lost cost reservations, wake agents on a new month"
SWEEP_RESERVATIONS_TASK = "costs.sweep_reservations"


ensure_sweep_schedule = periodic_seeder(
    name=SWEEP_NAME, task=SWEEP_RESERVATIONS_TASK, interval_setting="COSTS_SWEEP_INTERVAL"
)


class CostsConfig(AppConfig):
    """The cost ledger and budgets: below the apps that call models, above tasks."""

    name = "costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tasks.holds import register_budget_holds
        from tasks.serializers import register_task_cost

        from . import tools  # noqa: F401  registers report_usage (Celery finds tasks.py itself)
        from .holds import hold_reasons
        from .selectors import cost_of_task_tree

        register_task_cost(cost_of_task_tree)
        register_budget_holds(hold_reasons)
        post_migrate.connect(ensure_sweep_schedule, sender=self)
