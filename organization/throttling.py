"""Per-key request throttling (API_THROTTLE_RATE): 429 `rate_limited` with `Retry-After`."""

import logging

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from .auth import KeyUser

logger = logging.getLogger(__name__)


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Counts the requests of each API key, or of each logged-in user, in Django's cache.

    Anonymous requests are not counted: every path but the public ones answers them 401
    before throttling runs.
    """

    scope = "api"

    def get_rate(self) -> str | None:
        # Read on every request (not at import, as DRF does), so a deployment's or a test's
        # setting applies at once; "off" turns throttling off.
        rate = settings.API_THROTTLE_RATE
        return None if not rate or rate.lower() == "off" else rate

    def get_cache_key(self, request, view) -> str | None:
        user = request.user
        if isinstance(user, KeyUser):
            # The prefix is random per key, so a reused database id never inherits a history.
            ident = f"key:{user.api_key.prefix}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except Exception:
            # A rate limiter must not take the API down with its cache: let the request through.
            logger.warning("Throttle cache unavailable; request not counted", exc_info=True)
            return True
