"""Writes of the organization app. Each is one transaction."""

from django.db import transaction
from django.utils import timezone

from .auth import generate_key
from .models import Agent, ApiKey, Organization


@transaction.atomic
def api_key_create(
    *, organization: Organization, agent: Agent | None = None, name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is never stored nor shown again."""
    plaintext, prefix, digest = generate_key()
    key = ApiKey.objects.create(
        organization=organization, agent=agent, name=name, prefix=prefix, digest=digest
    )
    return key, plaintext


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
