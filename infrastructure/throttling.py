"""Per-key request throttling (API_THROTTLE_RATE): 429 `rate_limited` with `Retry-After`.

On Redis it is a fixed-window counter — SET NX EX, INCR and TTL in one script, one command —
where DRF's stock throttle reads and rewrites the pickled list of every request's time in the
window (two round trips, and up to API_THROTTLE_RATE floats each way). A window may so let a
key send up to twice its rate across a window's boundary, as fixed windows do. Other caches
(the embedded default's local memory) keep DRF's sliding log.
"""

import logging
import math
import threading
import time
from collections import OrderedDict
from types import SimpleNamespace

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from redis.commands.core import Script
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)

# The window opens with the first request (SET NX EX); one command to send and one reply to
# read, where a pipeline of the three costs three of each in redis-py's Python packing.
_COUNT = Script(
    None,
    b"redis.call('SET', KEYS[1], 0, 'EX', ARGV[1], 'NX') "
    b"return {redis.call('INCR', KEYS[1]), redis.call('TTL', KEYS[1])}",
)


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
        if getattr(user, "api_key", None) is not None:
            # The prefix is random per key, so a reused database id never inherits a history.
            ident = f"key:{user.api_key.prefix}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        self.retry_after = None
        try:
            cache = caches["default"]
            if not isinstance(cache, RedisCache) or self.rate is None:
                return super().allow_request(request, view)
            self.key = self.get_cache_key(request, view)
            if self.key is None:
                return True
            return self._count_in_redis(cache)
        except Exception:
            # A rate limiter must not take the API down with its cache: let the request through.
            logger.warning("Throttle cache unavailable; request not counted", exc_info=True)
            return True

    def _count_in_redis(self, cache: RedisCache) -> bool:
        key = cache.make_and_validate_key(self.key)
        client = cache._cache.get_client(key, write=True)
        count, ttl = _COUNT(keys=[key], args=[self.duration], client=client)
        if count <= self.num_requests:
            return True
        self.retry_after = ttl if ttl > 0 else self.duration
        return False

    def wait(self) -> float | None:
        if self.retry_after is not None:
            return self.retry_after
        return super().wait()


def key_over_rate(api_key) -> int | None:
    """Count one request of `api_key` at a door DRF does not serve (/mcp), in the same counter
    as its REST requests: the seconds to wait when it is over API_THROTTLE_RATE, else None."""
    throttle = ApiKeyRateThrottle()
    if throttle.allow_request(SimpleNamespace(user=SimpleNamespace(api_key=api_key)), None):
        return None
    return max(1, math.ceil(throttle.wait() or 1))


# --- failed authentication, per client address ---------------------------------------------
#
# Every 401 of /api/ and /mcp counts against the client's address (AUTH_FAILURE_LIMIT a window
# of AUTH_FAILURE_WINDOW_SECONDS, opened by the first failure); past the limit each request from
# that address answers 429 before any key is looked up, until the window ends (on each server
# process from its first 401 to that address on). The address is
# the connection's: uvicorn takes it from X-Forwarded-For only for proxies in
# FORWARDED_ALLOW_IPS.

_LOCKED_FOR = Script(
    None,
    b"local n = redis.call('GET', KEYS[1]) "
    b"if n and tonumber(n) >= tonumber(ARGV[1]) then return redis.call('TTL', KEYS[1]) end "
    b"return -2",
)


def _failures_key(address: str) -> str:
    return f"throttle_auth_failures_{address}"


# The addresses this process answered a 401 within the window, with when: only they are looked
# up in the cache, so a request from an address that never failed costs no round trip. A locked
# address so passes unchecked at most once per server process (then its 401 puts it here).
_FAILED_HERE: OrderedDict[str, float] = OrderedDict()
FAILED_HERE_MAX = 10_000
_FAILED_HERE_LOCK = threading.Lock()


def _failed_here(address: str) -> bool:
    at = _FAILED_HERE.get(address)
    if at is None:
        return False
    if time.monotonic() - at > settings.AUTH_FAILURE_WINDOW_SECONDS:
        _FAILED_HERE.pop(address, None)
        return False
    return True


def _remember_failure(address: str) -> None:
    with _FAILED_HERE_LOCK:
        _FAILED_HERE[address] = time.monotonic()
        _FAILED_HERE.move_to_end(address)
        while len(_FAILED_HERE) > FAILED_HERE_MAX:
            _FAILED_HERE.popitem(last=False)


def address_locked_for(address: str | None) -> int | None:
    """The seconds `address` must wait before trying to authenticate again, or None."""
    limit = settings.AUTH_FAILURE_LIMIT
    if not limit or not address or not _failed_here(address):
        return None
    try:
        cache = caches["default"]
        key = _failures_key(address)
        if isinstance(cache, RedisCache):
            key = cache.make_and_validate_key(key)
            ttl = _LOCKED_FOR(keys=[key], args=[limit], client=cache._cache.get_client(key))
            return None if ttl == -2 else max(1, ttl)
        failures = cache.get(key) or 0
        return settings.AUTH_FAILURE_WINDOW_SECONDS if failures >= limit else None
    except Exception:
        logger.warning("Throttle cache unavailable; address not checked", exc_info=True)
        return None


def count_auth_failure(address: str | None) -> None:
    """Count one failed authentication of `address` in its window."""
    if not settings.AUTH_FAILURE_LIMIT or not address:
        return
    _remember_failure(address)
    window = settings.AUTH_FAILURE_WINDOW_SECONDS
    try:
        cache = caches["default"]
        key = _failures_key(address)
        if isinstance(cache, RedisCache):
            key = cache.make_and_validate_key(key)
            _COUNT(keys=[key], args=[window], client=cache._cache.get_client(key, write=True))
            return
        cache.add(key, 0, window)
        cache.incr(key)
    except Exception:
        logger.warning("Throttle cache unavailable; failure not counted", exc_info=True)


def locked_out_message(wait: int) -> str:
    return (
        f"Too many failed authentications from your address: try again in {wait} seconds "
        "(AUTH_FAILURE_LIMIT)."
    )
