"""The one table the plumbing owns: the transactional outbox."""

import uuid

from django.db import models


class OutboxMessage(models.Model):
    """A Celery task to send, written in the same transaction as the change that needs it.

    Sent right after commit when the broker answers, else by the beat's relay once it is back;
    `dispatched_at` marks it sent.
    """

    task_name = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    # The Celery task id the message is sent with: one id however often the send is tried.
    task_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # The message's priority on the broker (Redis: 0, the default, is taken first).
    priority = models.PositiveSmallIntegerField(null=True, blank=True)
    # The trace context of the write that queued it (`traceparent`), restored when it is sent:
    # the task continues the request's trace even when the relay sends it later.
    trace_context = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "organization_outboxmessage"
        ordering = ["pk"]
        indexes = [
            # The relay reads only what is still to send.
            models.Index(
                fields=["id"],
                name="outbox_undispatched_idx",
                condition=models.Q(dispatched_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_name}{tuple(self.args)}"
