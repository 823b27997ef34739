"""API keys: `ao_<prefix>_<secret>`, stored as a SHA-256 digest, compared in constant time.

An agent key acts as its agent; an organization key acts as a human administrator.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from axes.backends import AxesStandaloneBackend
from django.utils import timezone
from rest_framework import authentication, exceptions

from infrastructure.inputs import text_problem

from . import sql
from .models import Agent, ApiKey, Organization

KEY_PREFIX = "ao"


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def generate_key() -> tuple[str, str, str]:
    """Return (plaintext key, prefix, digest); the plaintext is never stored."""
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return f"{KEY_PREFIX}_{prefix}_{secret}", prefix, digest_of(secret)


def key_from_plaintext(plaintext: str) -> ApiKey | None:
    """The active key matching `plaintext`, or None."""
    try:
        marker, prefix, secret = plaintext.strip().split("_", 2)
    except ValueError:
        return None
    # A prefix the database cannot hold as text (NUL) names no key: refused like any other.
    if marker != KEY_PREFIX or text_problem(prefix):
        return None
    key = sql.active_key(prefix)
    if key is None or not hmac.compare_digest(key.digest, digest_of(secret)):
        return None
    return key


def authenticate_key(plaintext: str) -> ApiKey | None:
    """The key a request presents, if active and consistent; its use is recorded.

    Every door (REST, MCP over HTTP, MCP over stdio) authenticates through this one function.
    """
    key = key_from_plaintext(plaintext or "")
    if key is None or (key.agent_id and key.agent.organization_id != key.organization_id):
        return None
    if key.agent is not None:
        key.agent.organization = key.organization  # the same row: no query for agent.organization
    # Recording use at most once a minute keeps reads from turning into writes.
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def bearer_token(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` value; None when it is not one.

    The one parser of every HTTP door (REST's authentication below, the /mcp gate); the
    scheme is case-insensitive, as HTTP authentication schemes are (RFC 9110 §11.1).
    """
    parts = header.split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


@dataclass(frozen=True)
class KeyUser:
    """request.user for API-key callers; DRF only needs it to say it is authenticated."""

    api_key: ApiKey
    is_authenticated: bool = True
    is_active: bool = True
    is_staff: bool = False
    is_superuser: bool = False
    is_anonymous: bool = False
    pk = None
    id = None

    @property
    def organization(self) -> Organization:
        return self.api_key.organization

    @property
    def agent(self) -> Agent | None:
        return self.api_key.agent

    def __str__(self) -> str:
        return f"api-key:{self.api_key.prefix}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        plaintext = bearer_token(header)
        if plaintext is None:
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <key>'.")
        key = authenticate_key(plaintext)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return KeyUser(key), key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class LoginLockoutBackend(AxesStandaloneBackend):
    """django-axes' lockout of the admin login, for logins that come with a request; a login
    without one (the test client's `login()`, a shell) is no client address's to lock."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
