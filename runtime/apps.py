from django.apps import AppConfig
from django.db.models.signals import post_migrate

from organization.schedules import check_visibility_outlasts, periodic_seeder

RUN_SWEEP_NAME = "Resume lost managed-agent runs"
SWEEP_RUNS_TASK = "runtime.sweep_runs"


ensure_run_sweep_schedule = periodic_seeder(
    name=RUN_SWEEP_NAME, task=SWEEP_RUNS_TASK, interval_setting="RUNTIME_SWEEP_INTERVAL"
)


def check_run_time_limit() -> None:
    """A run's task must end before Redis would deliver it again (its lease makes a copy back
    off, but every long run would be sent twice)."""
    check_visibility_outlasts("RUNTIME_RUN_TIME_LIMIT", "runs")
    check_visibility_outlasts("A2A_REMOTE_MAX_WAIT_SECONDS", "deliveries to remote A2A agents")


class RuntimeConfig(AppConfig):
    """Managed agents: woken by the apps below, run on the Celery workers."""

    name = "runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        check_run_time_limit()
        from costs.budgets import budget_made_room
        from costs.models import Budget
        from organization.models import Agent
        from organization.services import agent_gained_room
        from tasks.models import Task
        from tasks.signals import work_reached_agent

        from . import receivers

        work_reached_agent.connect(
            receivers.on_work_reached_agent, sender=Task, dispatch_uid="runtime-wake"
        )
        agent_gained_room.connect(
            receivers.on_agent_gained_room, sender=Agent, dispatch_uid="runtime-resume"
        )
        budget_made_room.connect(
            receivers.on_budget_made_room, sender=Budget, dispatch_uid="runtime-budget-room"
        )
        post_migrate.connect(ensure_run_sweep_schedule, sender=self)
