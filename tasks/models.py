"""Tasks. An agent's workload is derived from the tasks it holds, never stored as a counter."""

from django.conf import settings
from django.db import models

from infrastructure.prepared import insert_new, save_existing
from organization.models import Agent, Organization
from organization.workload import HELD_STATUSES as HELD


class Urgency(models.TextChoices):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    CRITICAL = "critical"


# Higher first when a queued task is picked for an expert who has room again.
URGENCY_RANK = {Urgency.CRITICAL: 4, Urgency.HIGH: 3, Urgency.NORMAL: 2, Urgency.LOW: 1}


class TaskStatus(models.TextChoices):
    QUEUED = "queued"
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    BLOCKED = "blocked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ESCALATED = "escalated"


# The statuses that count towards an agent's workload (docs/design.md § Domain), as organization
# names them.
HELD_STATUSES = tuple(TaskStatus(status) for status in HELD)
FINISHED_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


# Free-text limits of the API and the tools (issue 8: no list answer may grow without bound).
DESCRIPTION_MAX_LENGTH = 10_000
# Decision fields (primary reason, fallback, reasoning, notes), reasons and status notes.
NOTE_MAX_LENGTH = 2_000
# What a finished task carries (issue 11 §1): its result in words, and its data as JSON.
RESULT_MAX_LENGTH = 20_000
RESULT_DATA_MAX_BYTES = 100_000
# A comment's body.
COMMENT_MAX_LENGTH = 5_000
# How many of a task's subtasks its detail lists (oldest first); `subtask_progress` counts them
# all, and `GET /api/tasks?parent=<id>` pages through them all.
SUBTASKS_LISTED = 100


class Task(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="tasks")
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, max_length=DESCRIPTION_MAX_LENGTH)
    required_expertise = models.CharField(max_length=100, blank=True)
    urgency = models.CharField(max_length=10, choices=Urgency.choices, default=Urgency.NORMAL)
    urgency_rank = models.PositiveSmallIntegerField(default=2, editable=False)
    deadline = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.QUEUED)
    assignee = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="held_tasks"
    )
    queued_for = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="queued_tasks"
    )
    created_by_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set once, when the task is created (issue 11 §1): a task never changes parent, so the
    # tree of subtasks cannot form a cycle.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="subtasks"
    )
    # Handles of the agents the task passed through, oldest first (loop guard, seed 001).
    delegation_chain = models.JSONField(default=list, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    # Who put the task in the queue: the stale sweep escalates on that agent's behalf.
    queued_by = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Measured completion times (finished_at - assigned_at) drive the queue's wait estimate.
    assigned_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Given by whoever completes or fails the task (issue 11 §1).
    result = models.TextField(blank=True, default="", db_default="", max_length=RESULT_MAX_LENGTH)
    result_data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(parent=models.F("pk")), name="task_not_its_own_parent"
            ),
        ]
        indexes = [
            models.Index(fields=["assignee", "status"], name="task_assignee_status"),
            models.Index(
                fields=["queued_for", "status", "urgency_rank", "created_at"],
                name="task_queue_order",
            ),
            models.Index(fields=["organization", "status", "queued_at"], name="task_org_status"),
            # A list of the organization's tasks, newest first, reads one page of it.
            models.Index(fields=["organization", "created_at"], name="task_org_created"),
            # The dashboard, whatever the organization's size, each a small partial index: who
            # holds how many tasks (at capacity, held now), the queued tasks by urgency and by
            # deadline (stale), the escalated and blocked ones most urgent first (waiting on you).
            models.Index(
                fields=["organization", "assignee"],
                condition=models.Q(status__in=HELD),
                name="task_org_held",
            ),
            models.Index(
                fields=["organization", "urgency", "queued_at"],
                condition=models.Q(status="queued"),
                name="task_org_queued_urgency",
            ),
            models.Index(
                fields=["organization", "deadline"],
                condition=models.Q(status="queued"),
                name="task_org_queued_deadline",
            ),
            models.Index(
                fields=["organization", "-urgency_rank", "updated_at", "id"],
                condition=models.Q(status__in=["escalated", "blocked"]),
                name="task_org_waiting",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs):
        self.keep_urgency_rank()
        super().save(*args, **kwargs)

    def save_move(self) -> None:
        """Save a task a move read and changed: every column, by a statement compiled once."""
        self.keep_urgency_rank()
        save_existing(self)

    def save_new(self) -> None:
        """Insert a task made by `task_create`: its INSERT compiled once, not by the ORM anew."""
        self.keep_urgency_rank()
        insert_new(self)

    def keep_urgency_rank(self) -> None:
        # Kept in step with urgency so queues sort by an integer column in SQL.
        self.urgency_rank = URGENCY_RANK[self.urgency]


class ActorKind(models.TextChoices):
    AGENT = "agent"
    USER = "user"
    SYSTEM = "system"


class EventKind(models.TextChoices):
    CREATED = "created"
    ASSIGNED = "assigned"
    CLAIMED = "claimed"
    DELEGATED = "delegated"
    QUEUED = "queued"
    AUTO_ASSIGNED = "auto_assigned"
    ESCALATED = "escalated"
    STATUS_CHANGED = "status_changed"
    CANCELLED = "cancelled"
    # Issue 11 §1: a comment on the task, and the last of its open subtasks finished.
    COMMENT = "comment"
    SUBTASKS_DONE = "subtasks_done"
    # A human decision on the task changed state (docs/decisions.md).
    DECISION = "decision"


class Decision(models.TextChoices):
    DELEGATE = "DELEGATE"
    QUEUE = "QUEUE"
    ESCALATE = "ESCALATE"


class AppendOnlyError(Exception):
    pass


# The largest wait an event can store (a PositiveIntegerField is a 32-bit column on PostgreSQL).
MAX_WAIT_SECONDS = 2**31 - 1


class TaskEvent(models.Model):
    """The audit trail: append-only. Rows are inserted, never updated or deleted."""

    # Indexed by taskevent_org_time (organization, created_at): the dashboard's recent moves.
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Indexed by taskevent_task_time (task, created_at): a second index would only slow inserts.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events", db_index=False)
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    actor_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept as text so the trail still says who acted after an agent or user is deleted.
    actor_label = models.CharField(max_length=200)
    # The agent who receives the task through this event (inbox/webhook), if any.
    recipient = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    # Seed 001's DELEGATION DECISION.
    decision = models.CharField(max_length=10, choices=Decision.choices, blank=True)
    primary_choice = models.CharField(max_length=100, blank=True)
    primary_reason = models.TextField(blank=True)
    fallback = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    wait_time_seconds = models.PositiveIntegerField(null=True, blank=True)
    notes = models.TextField(blank=True)
    # Seeds 000/001: "note cross-team delegation in the decision log". Database defaults, so
    # that the sweep's raw bulk insert (which names its columns) needs no change.
    cross_team = models.BooleanField(default=False, db_default=False)
    coordination_note = models.TextField(blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(fields=["task", "created_at"], name="taskevent_task_time"),
            models.Index(fields=["organization", "created_at"], name="taskevent_org_time"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor_label}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise AppendOnlyError("Task events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Task events are append-only.")


class InboxItem(models.Model):
    """What reached an agent (never its own act): a task assigned, delegated, escalated or
    queued to it; a task it created or delegated finished; a comment; its subtasks done."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # Indexed by inbox_agent_read (agent, read_at).
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="inbox_items", db_index=False
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="inbox_items")
    event = models.ForeignKey(TaskEvent, on_delete=models.CASCADE, related_name="inbox_items")
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    message = models.TextField(blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["agent", "read_at"], name="inbox_agent_read")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.task} → {self.agent.handle}"

    @property
    def is_read(self) -> bool:
        return self.read_at is not None


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(models.Model):
    """One signed POST of an event to an agent's webhook URL (or the organization's), retried by
    Celery."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # The agent told; none for the organization's own webhook (a budget alert).
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="webhook_deliveries"
    )
    event = models.ForeignKey(
        TaskEvent, null=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    url = models.URLField("URL", max_length=500)
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # While an attempt runs, the end of its lease: a copy of the message does nothing until
    # then. Once it ended, when it ended; the sweep sends again a pending delivery left alone
    # too long after it (tasks/webhooks.py).
    leased_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # The sweep reads only the pending deliveries.
            models.Index(
                fields=["id"],
                name="webhookdelivery_pending_idx",
                condition=models.Q(status="pending"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.url} ({self.status})"


class TaskComment(models.Model):
    """The conversation on a task (issue 11 §1): whoever may see the task reads and writes it."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # Indexed by taskcomment_task_time (task, created_at).
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="comments", db_index=False
    )
    # None for a human (an organization key or an admin member): `author_label` says who.
    author = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept as text so the conversation still says who spoke after an agent is deleted.
    author_label = models.CharField(max_length=200)
    body = models.TextField(max_length=COMMENT_MAX_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["task", "created_at"], name="taskcomment_task_time")]

    def __str__(self) -> str:
        return f"{self.author_label} on {self.task}"


# --- humans decide before it happens (docs/decisions.md) ----------------------------------------


class PolicyTrigger(models.TextChoices):
    CROSS_TEAM_DELEGATION = "cross_team_delegation"
    URGENCY = "urgency"
    COLLABORATION_COST = "collaboration_cost"
    TOOL = "tool"
    ESCALATION_TO_HUMANS = "escalation_to_humans"


class PolicyScope(models.TextChoices):
    ORGANIZATION = "organization"
    TEAM = "team"
    AGENT = "agent"


class OnExpiry(models.TextChoices):
    REJECT = "reject"
    APPROVE = "approve"


# Bounds of what a policy, a question and a decision carry.
POLICY_LIST_MAX = 50
QUESTION_MAX_LENGTH = 2_000
OPTIONS_MAX = 8
OPTION_MAX_LENGTH = 200
ANSWER_MAX_LENGTH = 5_000
# An approval policy's settings, as the API, the admin and the organization file name them.
POLICY_FIELDS = (
    "name",
    "trigger",
    "urgencies",
    "cost_above_usd",
    "tools",
    "scope",
    "team",
    "agent",
    "deciders",
    "expires_after_seconds",
    "warn_before_seconds",
    "on_expiry",
    "enabled",
)


class ApprovalPolicy(models.Model):
    """Which moves wait for a human: a trigger, the scope it covers, who decides and by when."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="approval_policies"
    )
    name = models.CharField(max_length=200)
    trigger = models.CharField(max_length=30, choices=PolicyTrigger.choices)
    urgencies = models.JSONField(default=list, blank=True)
    cost_above_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    tools = models.JSONField(default=list, blank=True)
    scope = models.CharField(
        max_length=20, choices=PolicyScope.choices, default=PolicyScope.ORGANIZATION
    )
    team = models.ForeignKey(
        "organization.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # Usernames; empty: the organization's admins.
    deciders = models.JSONField(default=list, blank=True)
    expires_after_seconds = models.PositiveIntegerField(default=86_400)
    warn_before_seconds = models.PositiveIntegerField(default=0)
    # Fail closed by default: an expired approval executes only when the policy says so.
    on_expiry = models.CharField(max_length=10, choices=OnExpiry.choices, default=OnExpiry.REJECT)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        verbose_name_plural = "approval policies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(expires_after_seconds__gte=1), name="policy_expires_after_1s"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class DecisionKind(models.TextChoices):
    APPROVAL = "approval"
    QUESTION = "question"


class DecisionStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CHANGES_REQUESTED = "changes_requested"
    ANSWERED = "answered"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"


class HumanDecision(models.Model):
    """A move waiting for a human's approval, or an agent's question to one: the API's decision."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=DecisionKind.choices)
    policy = models.ForeignKey(
        ApprovalPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    # Who asked: an agent, or a human (a member's session or an organization key).
    requested_by = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_key = models.ForeignKey(
        "organization.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requester_label = models.CharField(max_length=200)
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="decisions"
    )
    # An approval's move: {"name": tool name, "arguments": its params}, exactly as it would run.
    action = models.JSONField(null=True, blank=True)
    # Why the policy gates it, in words.
    reason = models.TextField(blank=True)
    question = models.TextField(blank=True, max_length=QUESTION_MAX_LENGTH)
    options = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=20, choices=DecisionStatus.choices, default=DecisionStatus.PENDING
    )
    # The targets as they were asked about, and their hash (approving a changed target is refused).
    target = models.JSONField(default=dict, blank=True)
    target_hash = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_label = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    outcome = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["organization", "status"], name="decision_org_status"),
            models.Index(fields=["status", "expires_at"], name="decision_status_expiry"),
        ]

    def __str__(self) -> str:
        what = self.action["name"] if self.action else "question"
        return f"#{self.pk} {what} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == DecisionStatus.PENDING


class RefusalCount(models.Model):
    """How many moves a door refused in the organization, by the rule's code (403/409): what
    `/metrics` shows as `agent_org_refusals_total`, whichever process refused them."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    code = models.CharField(max_length=60)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "code"], name="one_count_per_code")
        ]

    def __str__(self) -> str:
        return f"{self.code}: {self.count}"
