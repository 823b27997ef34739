from django.apps import AppConfig
from django.db.models.signals import post_migrate

SWEEP_NAME = "Book lost cost reservations, wake agents on a new month"


def ensure_sweep_schedule(**kwargs) -> None:
    from django.conf import settings

    from organization.schedules import ensure_periodic_task

    from .tasks import SWEEP_RESERVATIONS_TASK

    ensure_periodic_task(
        name=SWEEP_NAME,
        task=SWEEP_RESERVATIONS_TASK,
        every=settings.COSTS_SWEEP_INTERVAL,
        using=kwargs.get("using", "default"),
    )


class CostsConfig(AppConfig):
    """The cost ledger and budgets (issue 12): below the apps that call models, above tasks."""

    name = "costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tasks.serializers import register_task_cost

        from . import tasks, tools  # noqa: F401  registers the Celery task and report_usage
        from .selectors import cost_of_task_tree

        register_task_cost(cost_of_task_tree)
        post_migrate.connect(ensure_sweep_schedule, sender=self)
