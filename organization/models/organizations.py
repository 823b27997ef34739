"""The tenant (Organization), the humans who administer it (Membership) and its teams."""

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from ..webhooks import validate_webhook_url


def new_webhook_secret() -> str:
    return secrets.token_hex(32)


class Organization(models.Model):
    """The tenant: every other row belongs to exactly one organization."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    # Signs webhook deliveries (HMAC-SHA256 of the body) so receivers can trust them.
    webhook_secret = models.CharField(max_length=64, default=new_webhook_secret, editable=False)
    # Where the organization's own notices go (a budget crossing 80 % or exhausted), signed as
    # the agents' deliveries are; blank: none.
    webhook_url = models.URLField(
        blank=True, help_text="Budget alerts are POSTed here, signed (docs/costs.md)."
    )
    # Whether any enabled approval policy exists (kept by tasks' policy services): a move of an
    # organization without one pays nothing for the gate (docs/decisions.md).
    has_approval_policies = models.BooleanField(default=False, db_default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        super().clean()
        if self.slug.startswith("_"):
            # The service's own organizations (the A2A conformance kit's `_conformance`).
            raise ValidationError({"slug": "A slug starting with “_” is reserved for the service."})
        if self.webhook_url:
            try:
                validate_webhook_url(self.webhook_url)
            except ValidationError as exc:
                raise ValidationError({"webhook_url": exc.messages}) from exc


class Membership(models.Model):
    """A human's place in an organization; admins edit it in the admin and call the API."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    is_admin = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="one_membership_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization}"


class Team(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="team_name_unique_in_org")
        ]

    def __str__(self) -> str:
        return self.name
