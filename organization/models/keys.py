"""Machine credentials (ApiKey) and the answers remembered for their retried POSTs."""

from django.core.exceptions import ValidationError
from django.db import models

from ..history import audited, related
from .agents import Agent
from .organizations import Organization


def key_revoked(row, before) -> str | None:
    """The audit's word for the change of a key that set `revoked_at`."""
    if before is not None and before.revoked_at is None and row.revoked_at is not None:
        return "revoked"
    return None


class ApiKey(models.Model):
    """A machine credential. Only a SHA-256 digest of the secret is stored."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_keys"
    )
    agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
        help_text="Leave empty for an organization key (acts as a human administrator).",
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    # Never the digest; the last use is written by requests, not by anyone changing the key.
    history = audited("api_key", exclude=["digest", "last_used_at"], action=key_revoked)

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        who = "organization"
        if self.agent_id:
            # The agent may be gone already: deleting it cascades to its keys (history's label).
            agent = related(self, "agent")
            who = agent.handle if agent is not None else f"agent {self.agent_id}"
        return f"{self.name or self.prefix} ({who})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def clean(self) -> None:
        if self.agent_id and self.agent.organization_id != self.organization_id:
            raise ValidationError({"agent": "The agent must belong to the key's organization."})


class IdempotencyKey(models.Model):
    """A creating POST's `Idempotency-Key` and its first answer, written in the transaction of
    the write itself: a retry with the same key and body gets that answer again instead of
    writing twice (organization/idempotency.py, docs/api.md#idempotency)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # Whose key it is: `key:<api key prefix>` or `user:<id>`; two callers never share one.
    caller = models.CharField(max_length=40)
    key = models.CharField(max_length=255)
    # SHA-256 of the method, path and body the key was first sent with.
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    body = models.JSONField(null=True)
    # The first answer's Location header (a created collaboration's URL), if it had one.
    location = models.CharField(max_length=2000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "caller", "key"], name="idempotency_key_unique"
            )
        ]
        # The prune deletes an organization's keys older than the window.
        indexes = [models.Index(fields=["organization", "created_at"], name="idempotency_age_idx")]

    def __str__(self) -> str:
        return f"{self.caller} {self.key}"
