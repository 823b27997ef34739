"""Per-key request throttling (issue 8 §4): API_THROTTLE_RATE requests per key (or logged-in
user); one more answers 429 `rate_limited` with `Retry-After`, in the one error shape."""

import pytest
from rest_framework.test import APIClient

from tests.conftest import KeyClient, agent_of
from tests.factories import make_admin_user, make_key

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counters():
    """Counters outlive a test's database rollback (ids are reused by the next run within the
    window): each test starts with none. Only the throttle's keys; the broker's stay."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    cache = caches["default"]
    if isinstance(cache, RedisCache):
        client = cache._cache.get_client(None, write=True)
        stale = list(client.scan_iter(match=cache.make_and_validate_key("throttle_*")))
        if stale:
            client.delete(*stale)
    else:
        cache.clear()


def assert_rate_limited(response):
    assert response.status_code == 429, response.content
    assert response.json()["success"] is False
    assert response.json()["code"] == "rate_limited"
    assert int(response["Retry-After"]) > 0


def test_a_key_over_its_rate_is_429_with_retry_after(demo, settings):
    settings.API_THROTTLE_RATE = "3/min"
    sarah = KeyClient(make_key(demo, agent_of(demo, "agent-sarah")))
    for _ in range(3):
        assert sarah.get("/api/roster").status_code == 200
    assert_rate_limited(sarah.get("/api/roster"))
    assert_rate_limited(sarah.post("/api/tasks", {"title": "x"}, format="json"))


def test_each_key_has_its_own_budget(demo, settings):
    settings.API_THROTTLE_RATE = "2/min"
    sarah = agent_of(demo, "agent-sarah")
    first, second, org = (
        KeyClient(make_key(demo, sarah)),
        KeyClient(make_key(demo, sarah)),
        KeyClient(make_key(demo)),
    )
    for _ in range(2):
        assert first.get("/api/roster").status_code == 200
    assert_rate_limited(first.get("/api/roster"))
    assert second.get("/api/roster").status_code == 200
    assert org.get("/api/agents").status_code == 200


def test_a_logged_in_admin_member_is_throttled_too(demo, settings):
    settings.API_THROTTLE_RATE = "1/min"
    client = APIClient()
    client.force_login(make_admin_user(demo))
    assert client.get("/api/agents").status_code == 200
    assert_rate_limited(client.get("/api/agents"))


def test_off_turns_throttling_off(demo, settings):
    settings.API_THROTTLE_RATE = "off"
    sarah = KeyClient(make_key(demo, agent_of(demo, "agent-sarah")))
    assert all(sarah.get("/api/tools").status_code == 200 for _ in range(5))


def test_an_unreachable_throttle_cache_lets_requests_through(demo, settings):
    """The limiter must not take the API down with its cache (Redis away → no 500)."""
    settings.API_THROTTLE_RATE = "1/min"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    sarah = KeyClient(make_key(demo, agent_of(demo, "agent-sarah")))
    assert [sarah.get("/api/tools").status_code for _ in range(2)] == [200, 200]


@pytest.mark.parametrize("rate", ["600", "x/min", "600/fortnight", "0/min"])
def test_a_mistyped_rate_stops_start_up_with_a_message(rate):
    """DRF parses the rate per request: a typo answered 500 on every call instead."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "API_THROTTLE_RATE": rate},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"API_THROTTLE_RATE={rate!r}: use <n>/<second|minute|hour|day>" in result.stderr


@pytest.fixture
def redis_cache():
    """The cache, when it is Redis (the counter's own path)."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    cache = caches["default"]
    if not isinstance(cache, RedisCache):
        pytest.skip("the Redis path needs REDIS_URL (CI sets it)")
    return cache


def test_on_redis_a_key_is_one_counter_with_its_window_as_ttl(demo, settings, redis_cache):
    """The Redis path: SET NX EX + INCR + TTL in one script, not DRF's pickled list."""
    cache = redis_cache
    settings.API_THROTTLE_RATE = "5/min"
    key = make_key(demo, agent_of(demo, "agent-sarah"))
    sarah = KeyClient(key)
    for _ in range(3):
        assert sarah.get("/api/roster").status_code == 200
    prefix = key.split("_")[1]
    stored = cache.make_and_validate_key(f"throttle_api_key:{prefix}")
    client = cache._cache.get_client(stored)
    assert client.get(stored) == b"3"
    assert 0 < client.ttl(stored) <= 60
    for _ in range(2):
        assert sarah.get("/api/roster").status_code == 200
    response = sarah.get("/api/roster")
    assert_rate_limited(response)
    assert int(response["Retry-After"]) <= 60


def test_on_redis_the_counter_survives_a_server_that_forgot_its_script(demo, settings, redis_cache):
    """A restarted Redis (or SCRIPT FLUSH) no longer knows the script: it is loaded again."""
    settings.API_THROTTLE_RATE = "2/min"
    key = make_key(demo, agent_of(demo, "agent-sarah"))
    sarah = KeyClient(key)
    assert sarah.get("/api/roster").status_code == 200
    redis_cache._cache.get_client(None, write=True).script_flush()
    assert sarah.get("/api/roster").status_code == 200
    assert_rate_limited(sarah.get("/api/roster"))
