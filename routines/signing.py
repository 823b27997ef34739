"""The inbound webhook's secret and signature: `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`,
the family of the outgoing webhooks' signature (tasks/webhooks.py).

The secret is never stored: it is HMAC-SHA256(SECRET_KEY, the routine's random nonce), computed
when it is shown or a signature is checked. Verifying needs the raw secret (a digest would not
do), and this keeps it out of the database and out of any export; rotating draws a new nonce.
"""

import hashlib
import hmac
import logging
import secrets
import time

from django.conf import settings
from django.core.cache import caches

logger = logging.getLogger(__name__)

# A signature older (or further in the future) than this is refused: a captured request cannot
# be replayed later; within it, a signature already used is refused (`first_use`).
MAX_AGE_SECONDS = 300
PREFIX = "sha256="


def new_nonce() -> str:
    return secrets.token_hex(32)


def secret_of(nonce: str) -> str:
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"routine-webhook:{nonce}".encode(), hashlib.sha256).hexdigest()


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What the sender puts in X-Agent-Org-Signature."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return PREFIX + mac.hexdigest()


def is_valid(*, nonce: str, timestamp: str | None, sent: str | None, body: bytes) -> bool:
    """A fresh timestamp (Unix seconds, within MAX_AGE_SECONDS) and its signature match."""
    if not timestamp or not sent or not timestamp.isascii() or not timestamp.isdigit():
        return False
    if len(timestamp) > 12 or abs(time.time() - int(timestamp)) > MAX_AGE_SECONDS:
        return False
    expected = signature(secret_of(nonce), timestamp, body)
    return hmac.compare_digest(expected.encode(), sent.encode("utf-8", "replace"))


def first_use(*, routine_id: int, sent: str) -> bool:
    """Whether a valid signature is used for the first time: remembered in the shared cache for
    as long as its timestamp is fresh, so a captured call cannot be replayed within it either."""
    key = f"routine_trigger_seen:{routine_id}:{sent}"
    try:
        return caches["default"].add(key, 1, timeout=2 * MAX_AGE_SECONDS + 1)
    except Exception:
        # As the throttle: an absent cache must not take the webhook down (the age still holds).
        logger.warning("Cache unavailable; a trigger's signature not checked for reuse")
        return True
