from django.apps import AppConfig
from django.db.models.signals import post_migrate

from organization.schedules import periodic_seeder

STALE_SWEEP_NAME = "Escalate stale queued tasks"
STALE_SWEEP_TASK = "tasks.sweep_stale_tasks"
WEBHOOK_SWEEP_NAME = "Send lost webhook deliveries again"
WEBHOOK_SWEEP_TASK = "tasks.sweep_webhook_deliveries"
DECISIONS_SWEEP_NAME = "Warn, expire and supersede decisions"
DECISIONS_SWEEP_TASK = "tasks.sweep_decisions"


ensure_stale_sweep_schedule = periodic_seeder(
    name=STALE_SWEEP_NAME, task=STALE_SWEEP_TASK, interval_setting="STALE_CHECK_INTERVAL"
)
# The engine's other sweep, on the same interval (STALE_CHECK_SECONDS).
ensure_webhook_sweep_schedule = periodic_seeder(
    name=WEBHOOK_SWEEP_NAME, task=WEBHOOK_SWEEP_TASK, interval_setting="STALE_CHECK_INTERVAL"
)

ensure_decisions_sweep_schedule = periodic_seeder(
    name=DECISIONS_SWEEP_NAME,
    task=DECISIONS_SWEEP_TASK,
    interval_setting="DECISIONS_SWEEP_INTERVAL",
)


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from organization import registry
        from organization.services import agent_gained_room, agent_leaving

        from . import tools  # noqa: F401  registers the task tools
        from .services import escalate_work_of_leaving_agent, fill_from_queue
        from .services.gate import tool_gate
        from .sql import install_postgresql_extras

        post_migrate.connect(ensure_stale_sweep_schedule, sender=self)
        post_migrate.connect(ensure_webhook_sweep_schedule, sender=self)
        post_migrate.connect(install_postgresql_extras, sender=self)
        post_migrate.connect(ensure_decisions_sweep_schedule, sender=self)
        from infrastructure.errors import refused

        from .refusals import count_refusal

        refused.connect(count_refusal, dispatch_uid="count-refusals")
        # The approval gate for a call of a tool a policy names (docs/decisions.md).
        registry.register_gate(tool_gate)
        # Rule 5: a resumed agent, or one given more capacity, receives its queue at once.
        agent_gained_room.connect(
            lambda agent, **kwargs: fill_from_queue(agent), weak=False, dispatch_uid="fill-queue"
        )
        # Rule 6: a deleted agent's work is escalated, each task by its move and event, first.
        agent_leaving.connect(
            escalate_work_of_leaving_agent, weak=False, dispatch_uid="escalate-leaving-agent"
        )
