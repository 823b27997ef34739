from django.apps import AppConfig
from django.db.models.signals import post_migrate

RUN_SWEEP_NAME = "Resume lost managed-agent runs"


def ensure_run_sweep_schedule(**kwargs) -> None:
    """Seed the run sweep's beat schedule once (organization.schedules)."""
    from django.conf import settings

    from organization.schedules import ensure_periodic_task

    from .models import SWEEP_RUNS_TASK

    ensure_periodic_task(
        name=RUN_SWEEP_NAME,
        task=SWEEP_RUNS_TASK,
        every=settings.RUNTIME_SWEEP_INTERVAL,
        using=kwargs.get("using", "default"),
    )


def check_run_time_limit() -> None:
    """Redis re-delivers unacked work after visibility_timeout: it must outlast a whole run, or
    a run still at work is delivered again (its lease makes the copy back off, but every long run
    would be sent twice)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    visibility = float(options.get("visibility_timeout", 3600))
    if visibility <= settings.RUNTIME_RUN_TIME_LIMIT:
        raise ImproperlyConfigured(
            f"CELERY_VISIBILITY_TIMEOUT ({visibility:g} s) must exceed RUNTIME_RUN_TIME_LIMIT "
            f"({settings.RUNTIME_RUN_TIME_LIMIT} s), or Redis re-delivers runs that are still "
            "running. Raise it, or lower the run's time limit."
        )


class RuntimeConfig(AppConfig):
    """Managed agents (issue 11 §2): woken by the apps below, run on the Celery workers."""

    name = "runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        check_run_time_limit()
        from collaboration.providers import Purpose
        from collaboration.providers.offline import register_routine
        from costs.budgets import budget_made_room
        from costs.models import Budget
        from organization.models import Agent
        from organization.services import agent_gained_room
        from tasks.models import Task
        from tasks.signals import work_reached_agent

        from . import offline, receivers

        work_reached_agent.connect(
            receivers.on_work_reached_agent, sender=Task, dispatch_uid="runtime-wake"
        )
        agent_gained_room.connect(
            receivers.on_agent_gained_room, sender=Agent, dispatch_uid="runtime-resume"
        )
        budget_made_room.connect(
            receivers.on_budget_made_room, sender=Budget, dispatch_uid="runtime-budget-room"
        )
        # The offline provider plays the runtime's deterministic routine for a run's calls.
        register_routine(Purpose.RUN, offline.routine)
        post_migrate.connect(ensure_run_sweep_schedule, sender=self)
