"""Collaborative sessions (seed 004): one session, one Contribution per agent, an event log.

Every step is safe twice (at-least-once delivery): Contribution rows exist from the start and a
finished one is never run again.
"""

import uuid

from django.conf import settings
from django.db import models

from organization.models import Agent, Organization

from .synthesis import STRATEGIES


class Mode(models.TextChoices):
    PARALLEL = "parallel"
    SEQUENTIAL = "sequential"
    HIERARCHICAL = "hierarchical"


# The role of a hierarchical session's first agent, and the name the coordinator's calls go by.
COORDINATOR_ROLE = "coordinator"


# Derived from the strategy registry (adding a strategy is a module and a line there):
# Synthesis.COORDINATOR == "coordinator", Synthesis.BEST_OF == "best_of", …
Synthesis = models.TextChoices(
    "Synthesis",
    [(key.upper(), (key, label)) for key, (label, _) in STRATEGIES.items()],
    module=__name__,
)


class SessionStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SYNTHESIZING = "synthesizing"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_SESSION_STATUSES = (
    SessionStatus.COMPLETED,
    SessionStatus.PARTIAL,
    SessionStatus.FAILED,
    SessionStatus.CANCELLED,
)


class ContributionStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


# A contribution in one of these is final: a re-delivered session never runs it again.
FINISHED_CONTRIBUTION_STATUSES = (
    ContributionStatus.COMPLETED,
    ContributionStatus.FAILED,
    ContributionStatus.TIMED_OUT,
    ContributionStatus.SKIPPED,
    ContributionStatus.CANCELLED,
)


class CollaborationSession(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="collaboration_sessions"
    )
    created_by_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who asked, as shown in the API: an agent handle, `user:<name>` or `org-key:<prefix>`.
    created_by = models.CharField(max_length=200, blank=True)
    task = models.TextField()
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.PARALLEL)
    synthesis = models.CharField(
        max_length=20, choices=Synthesis.choices, default=Synthesis.COORDINATOR
    )
    # Validated {provider, model, temperature, max_tokens} for the synthesis/plan coordinator.
    coordinator_config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    # Effective limits: the settings, lowered per session if asked.
    max_parallel = models.PositiveSmallIntegerField()
    agent_timeout = models.FloatField(help_text="Seconds per agent.")
    max_total_tokens = models.PositiveIntegerField()

    status = models.CharField(
        max_length=20, choices=SessionStatus.choices, default=SessionStatus.QUEUED
    )
    result = models.TextField(blank=True)
    consensus = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Deliveries of the session task so far (more than one: the worker died and it resumed).
    attempts = models.PositiveIntegerField(default=0)
    # The run that owns the session now and when it last said so; a re-delivered copy that
    # finds a fresh heartbeat of another run backs off instead of running the session twice.
    lease_token = models.CharField(max_length=36, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When its run task was last sent (at start, then by the sweep): the sweep sends a session
    # again at most once a lease (one waiting in a long queue too: a copy backs off at its lease).
    dispatched_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.mode} session {str(self.id)[:8]}: {self.task[:40]}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_SESSION_STATUSES


class Contribution(models.Model):
    session = models.ForeignKey(
        CollaborationSession, on_delete=models.CASCADE, related_name="contributions"
    )
    position = models.PositiveSmallIntegerField()
    # The agent's name in this session: the org agent's handle or the ad-hoc specialist's name.
    agent_key = models.CharField(max_length=100)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="contributions"
    )
    display_name = models.CharField(max_length=200, blank=True)
    role = models.CharField(max_length=200, blank=True)
    focus = models.TextField(blank=True)
    # Validated {provider, model, temperature, max_tokens, system_prompt, tools} of the session's
    # agent item; an org agent's own LLM settings are read from the Agent when it runs.
    config = models.JSONField(default=dict, blank=True)
    # Hierarchical mode: the part of the task the coordinator assigned to this specialist.
    subtask = models.TextField(blank=True)

    status = models.CharField(
        max_length=20, choices=ContributionStatus.choices, default=ContributionStatus.PENDING
    )
    response = models.TextField(blank=True)
    verdict = models.CharField(max_length=100, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    provider = models.CharField(max_length=20, blank=True)
    model = models.CharField(max_length=100, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)
    # HTTP attempts the SDK made for the answer (its own retries on 429/5xx included).
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    # A specialist with tools: its model turns and tool calls in order (collaboration/toolloop.py),
    # written as each happens, so a resumed run does not do again what was done.
    turns = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "agent_key"], name="one_contribution_per_session_agent"
            ),
            models.UniqueConstraint(
                fields=["session", "position"], name="one_contribution_per_session_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_key} ({self.status})"

    @property
    def duration_ms(self) -> int | None:
        if self.started_at and self.finished_at:
            return int((self.finished_at - self.started_at).total_seconds() * 1000)
        return None

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_CONTRIBUTION_STATUSES


class SessionEvent(models.Model):
    """Seed 004's events (`tool:collaborative:…`), stored in the order they happened."""

    session = models.ForeignKey(
        CollaborationSession, on_delete=models.CASCADE, related_name="events"
    )
    name = models.CharField(max_length=80)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The id is allocated on insert, so it orders events even when two share a timestamp.
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name
