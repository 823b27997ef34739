"""The human-defined hierarchy: an agent's role and the organization's team rule."""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from ..history import audited
from .agents import Agent
from .organizations import Organization


class HierarchyRole(models.TextChoices):
    SPECIALIST = "specialist"
    SUPERVISOR = "supervisor"
    WORKER = "worker"


class AgentRole(models.Model):
    """Seed 003's agent role: one per agent, none means worker without peer assignment."""

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="hierarchy_role")
    role = models.CharField(max_length=20, choices=HierarchyRole.choices)
    can_assign_to_peers = models.BooleanField(default=False)
    can_escalate_to_supervisor = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = audited("agent_role", organization=lambda role: role.agent.organization_id)

    def __str__(self) -> str:
        return f"{self.agent.handle}: {self.role}"


# The stale-queue thresholds a team rule may hold (docs/tasks.md): from a second (0 or less
# would make every queued task stale at once: escalate instead of queueing) to ten years (in
# effect "never"; far more, and `now - threshold` leaves PostgreSQL's timestamp range, which
# broke the dashboard and the sweep of every organization). The sweep clamps to them as well.
STALE_AFTER_MIN = timedelta(seconds=1)
STALE_AFTER_MAX = timedelta(days=3650)
STALE_AFTER_VALIDATORS = [
    MinValueValidator(STALE_AFTER_MIN, "At least 1 second (0:00:01)."),
    MaxValueValidator(STALE_AFTER_MAX, "At most 3650 days (ten years)."),
]


class TeamRule(models.Model):
    """Seed 003's workspace rules, plus our delegation depth and stale-queue thresholds."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="team_rule"
    )
    allow_peer_assignment = models.BooleanField(default=False)
    require_supervisor_for_tasks = models.BooleanField(default=False)
    default_supervisor = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    max_delegation_depth = models.PositiveSmallIntegerField(default=5)
    stale_after_critical = models.DurationField(
        default=timedelta(minutes=15), validators=STALE_AFTER_VALIDATORS
    )
    stale_after_high = models.DurationField(
        default=timedelta(hours=1), validators=STALE_AFTER_VALIDATORS
    )
    stale_after_normal = models.DurationField(
        default=timedelta(hours=4), validators=STALE_AFTER_VALIDATORS
    )
    stale_after_low = models.DurationField(
        default=timedelta(hours=24), validators=STALE_AFTER_VALIDATORS
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = audited("team_rule")

    def __str__(self) -> str:
        return f"Team rules of {self.organization}"

    def clean(self) -> None:
        if self.default_supervisor_id:
            supervisor = self.default_supervisor
            if supervisor.organization_id != self.organization_id:
                raise ValidationError(
                    {"default_supervisor": "Supervisor agent not found in workspace"}
                )
            role = AgentRole.objects.filter(agent=supervisor).first()
            if role is None or role.role != HierarchyRole.SUPERVISOR:
                raise ValidationError(
                    {
                        "default_supervisor": "Agent must have supervisor role to be default supervisor"
                    }
                )
