"""Expertise: the terms an agent knows, and the groups of related terms an organization names."""

from django.core.exceptions import ValidationError
from django.db import models

from ..history import audited
from .organizations import Organization

# Bounds that keep a roster answer small (issue 8): a term is as long as a task's
# required_expertise may be.
EXPERTISE_MAX_ITEMS = 50
EXPERTISE_ITEM_MAX_LENGTH = 100


def validate_expertise(value) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError("Expertise must be a list of non-empty strings.")
    if len(value) > EXPERTISE_MAX_ITEMS:
        raise ValidationError(f"At most {EXPERTISE_MAX_ITEMS} expertise terms.")
    if any(len(v) > EXPERTISE_ITEM_MAX_LENGTH for v in value):
        raise ValidationError(
            f"An expertise term has at most {EXPERTISE_ITEM_MAX_LENGTH} characters."
        )


class ExpertiseGroup(models.Model):
    """Human-defined related expertise (e.g. Databases = PostgreSQL, MySQL, Redis)."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="expertise_groups"
    )
    name = models.CharField(max_length=100)
    expertise = models.JSONField(default=list, validators=[validate_expertise])

    history = audited("expertise_group")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="expertise_group_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return self.name
