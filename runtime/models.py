"""Runs of managed agents: what woke an agent (`RunTrigger`), and what its model did (`Run`).

At most one run per agent is queued or running; what arrives meanwhile waits for its end."""

from django.conf import settings
from django.db import models

from organization.models import Agent, Organization
from tasks.models import Task, TaskStatus
from tasks.signals import WAKING_KINDS

# The Celery task that runs a run (runtime/tasks.py); services queue it by name through the outbox.
RUN_AGENT_TASK = "runtime.run_agent"

# What may wake an agent: the inbox kinds of `tasks.signals.WAKING_KINDS`, plus `resumed` (an agent
# resumed with work waiting for it).
RESUMED = "resumed"
TRIGGERS = (*sorted(WAKING_KINDS), RESUMED)


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
# The tasks a run may settle (complete or block): its agent still holds them, not blocked.
SETTLEABLE = (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS)
FINISHED_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED)


class Run(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    # The task of the first trigger, and that trigger's kind; every trigger is a RunTrigger.
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    trigger = models.CharField(max_length=20, choices=[(t, t) for t in TRIGGERS])
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    # The run this one follows up (the triggers that arrived while that one ran).
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Its place in its chain of wake-ups: 1 when a human's or outside agent's act woke it, else
    # one more than the run whose act woke it (the shallowest of the triggers it started with).
    depth = models.PositiveIntegerField(default=1)
    # What the model was given, fixed when the run first starts (a resumed run replays it).
    system_prompt = models.TextField(blank=True, default="")
    input = models.TextField(blank=True, default="")
    context = models.JSONField(default=dict, blank=True)
    provider = models.CharField(max_length=20, blank=True, default="")
    model = models.CharField(max_length=100, blank=True, default="")
    max_turns = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # What the runtime did once the model stopped: per task, completed with the final answer,
    # blocked with the reason, or left as the model left it.
    outcome = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    # What a running run's model call waits for, if anything (collaboration/providers/slots.py).
    waiting_for = models.CharField(
        max_length=20,
        blank=True,
        default="",
        choices=[("model_slot", "a model slot"), ("rate_limit", "the provider's rate limit")],
    )
    # The lease: the worker running it renews heartbeat_at; a stale one is resumed elsewhere.
    lease_token = models.CharField(max_length=32, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            # Two triggers racing for one agent never start two runs.
            models.UniqueConstraint(
                fields=["agent"],
                condition=models.Q(status__in=ACTIVE_STATUSES),
                name="one_active_run_per_agent",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "agent", "-created_at"], name="run_org_agent"),
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} of {self.agent.handle}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def turns(self) -> list[dict]:
        """Each model turn and tool call, in order (collaboration/toolloop.py's turns)."""
        return [row.data for row in self.turn_rows.all()]


class RunTurn(models.Model):
    """One turn of a run — a model turn or a tool call — as it happens: a row each, written in
    place by its index (a tool call twice: running, then its outcome), so recording a turn costs
    the same in a run's first turn as in its two-hundredth."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="turn_rows")
    index = models.PositiveIntegerField()
    data = models.JSONField()

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="run_turn_index_unique"),
        ]

    def __str__(self) -> str:
        return f"turn {self.index} of run #{self.run_id}"


class HeldReason(models.TextChoices):
    """Why a wake-up was held (services.run_wake): the bound it would have passed."""

    CHAIN = "chain", "runs in a row woke one another (RUNTIME_MAX_CHAIN_RUNS)"
    AGENT_HOUR = "agent_hour", "the agent's runs this hour (RUNTIME_MAX_AGENT_RUNS_PER_HOUR)"
    COMMENTS = "comments", "managed agents' comments on the task (RUNTIME_MAX_AGENT_COMMENT_WAKES)"


class RunTrigger(models.Model):
    """One wake-up of a managed agent: why (`trigger`, an inbox kind) and about which task; `run`
    null while it waits or is `held` by a bound, `woken_by` the run whose call caused it."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="run_triggers")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="triggers"
    )
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="run_triggers"
    )
    trigger = models.CharField(max_length=20, choices=[(t, t) for t in TRIGGERS])
    woken_by = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="woke"
    )
    # The depth of the run that caused it (0: a human's or an outside agent's act, or a release).
    depth = models.PositiveIntegerField(default=0)
    # Non-empty: held by that bound, no run takes it until a human releases it.
    held = models.CharField(max_length=20, blank=True, default="", choices=HeldReason.choices)
    released_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(
                fields=["agent"], name="run_trigger_waiting", condition=models.Q(run__isnull=True)
            ),
            models.Index(
                fields=["organization", "task"],
                name="run_trigger_held",
                condition=~models.Q(held=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trigger} of {self.agent.handle}"

    @property
    def held_because(self) -> str:
        """Why the wake-up is held, in a sentence a manager reads ("" when it is not)."""
        if self.held == HeldReason.CHAIN:
            return (
                f"{self.depth} runs in a row had woken one another since a human's last act "
                f"(the limit, RUNTIME_MAX_CHAIN_RUNS, is {settings.RUNTIME_MAX_CHAIN_RUNS})."
            )
        if self.held == HeldReason.AGENT_HOUR:
            return (
                f"The agent had run {settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR} times in the last "
                "hour (RUNTIME_MAX_AGENT_RUNS_PER_HOUR)."
            )
        if self.held == HeldReason.COMMENTS:
            return (
                "Managed agents' comments on the task had woken agents "
                f"{settings.RUNTIME_MAX_AGENT_COMMENT_WAKES} times this hour "
                "(RUNTIME_MAX_AGENT_COMMENT_WAKES)."
            )
        return ""
