"""Tasks. An agent's workload is derived from the tasks it holds, never stored as a counter."""

from django.conf import settings
from django.db import models

from organization.models import Agent, Organization


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


# The statuses that count towards an agent's workload (DESIGN.md § Domain).
HELD_STATUSES = (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED)
FINISHED_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


class Task(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="tasks")
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
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
    # Handles of the agents the task passed through, oldest first (loop guard, seed 001).
    delegation_chain = models.JSONField(default=list, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["assignee", "status"], name="task_assignee_status"),
            models.Index(
                fields=["queued_for", "status", "urgency_rank", "created_at"],
                name="task_queue_order",
            ),
            models.Index(fields=["organization", "status", "queued_at"], name="task_org_status"),
        ]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs):
        # Kept in step with urgency so queues sort by an integer column in SQL.
        self.urgency_rank = URGENCY_RANK[self.urgency]
        super().save(*args, **kwargs)
