"""Routines: recurring work owned by a team or an agent, fired on the beat (docs/routines.md)."""

from django.db import models
from django.db.models import Q

from organization.models import Agent, Organization, Team
from tasks.models import DESCRIPTION_MAX_LENGTH, Task, Urgency

MIN_INTERVAL_SECONDS = 5


class Concurrency(models.TextChoices):
    SKIP = "skip"  # the default: nothing new while the last occurrence's task is open
    QUEUE = "queue"  # held, then created once the open one finishes
    ALLOW = "allow"


class CatchUp(models.TextChoices):
    SKIP = "skip"  # the default: missed occurrences are recorded as skipped, never replayed
    RUN_ONCE = "run_once"


# A routine's settings, as the API, the admin and the organization file name them.
ROUTINE_FIELDS = (
    "title",
    "description",
    "required_expertise",
    "urgency",
    "team",
    "agent",
    "cron",
    "timezone",
    "interval_seconds",
    "concurrency",
    "catch_up",
    "enabled",
)


class Routine(models.Model):
    """The issue's fields, named as the API names them, so that an export is a plain mapping."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="routines"
    )
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, max_length=DESCRIPTION_MAX_LENGTH)
    required_expertise = models.CharField(max_length=100, blank=True)
    urgency = models.CharField(max_length=10, choices=Urgency.choices, default=Urgency.NORMAL)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="routines"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="routines"
    )
    cron = models.CharField(max_length=100, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.CharField(
        max_length=10, choices=Concurrency.choices, default=Concurrency.SKIP
    )
    catch_up = models.CharField(max_length=10, choices=CatchUp.choices, default=CatchUp.SKIP)
    enabled = models.BooleanField(default=True)

    # The webhook secret is derived from SECRET_KEY and this nonce (routines/signing.py): the
    # database alone does not hold it.
    webhook_nonce = models.CharField(max_length=64, editable=False)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The scheduled time the routine waits for next (None while disabled): what tells a tick
    # on time from a missed one (docs/routines.md).
    next_run_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "pk"]
        # The beat's sweep reads the enabled routines whose awaited time is past.
        indexes = [
            models.Index(fields=["next_run_at"], condition=Q(enabled=True), name="routine_due")
        ]
        constraints = [
            models.CheckConstraint(
                condition=(Q(team__isnull=False) & Q(agent__isnull=True))
                | (Q(team__isnull=True) & Q(agent__isnull=False)),
                name="routine_one_owner",
            ),
            models.CheckConstraint(
                condition=(Q(cron="") & Q(interval_seconds__gte=MIN_INTERVAL_SECONDS))
                | (~Q(cron="") & Q(interval_seconds__isnull=True)),
                name="routine_one_schedule",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def owner(self) -> str:
        return self.team.name if self.team_id else self.agent.handle


class Outcome(models.TextChoices):
    CREATED = "created"
    SKIPPED = "skipped"
    # Internal: an occurrence a `queue` routine holds until its open task finishes; it becomes
    # `created` then, and the API does not list it before.
    HELD = "held"


class Source(models.TextChoices):
    SCHEDULE = "schedule"
    RUN = "run"
    TRIGGER = "trigger"


class Occurrence(models.Model):
    """One time a routine came due: the task it created, or why none."""

    routine = models.ForeignKey(Routine, on_delete=models.CASCADE, related_name="occurrences")
    at = models.DateTimeField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    source = models.CharField(max_length=10, choices=Source.choices)
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["routine", "-at", "-id"], name="occurrence_newest"),
            # The task a routine's concurrency waits on: its newest (services.open_task).
            models.Index(fields=["routine", "-task"], name="occurrence_last_task"),
        ]

    def __str__(self) -> str:
        return f"{self.routine} at {self.at:%Y-%m-%d %H:%M:%S}: {self.outcome}"
