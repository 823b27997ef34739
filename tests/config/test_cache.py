"""The Redis cache keeps one connection pool per process (config/cache.py).

Django makes a cache object per context, and a server that runs each request in a fresh copy of
the context (a2wsgi, for one) makes the stock backend open a new Redis
connection per request.
"""

import contextvars
import os

import pytest
from django.core.cache import caches


def _in_a_new_context(fn):
    return contextvars.Context().run(fn)


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL") and not os.environ.get("CI"),
    reason="the Redis cache is configured only with REDIS_URL",
)
def test_requests_in_fresh_contexts_share_one_redis_connection():
    cache = caches["default"]
    assert type(cache).__name__ == "SharedPoolRedisCache"

    def one_request():
        cache = caches["default"]
        cache.set("agent-org-test-shared-pool", 1, 5)
        return cache, cache._cache

    # The pool is the process's: a test before this one (threads making requests) may have
    # opened connections in it already. Count what these twenty sequential requests open.
    pool = cache._cache._get_connection_pool(write=True)
    before = pool._created_connections
    results = [_in_a_new_context(one_request) for _ in range(20)]
    # Each fresh context still gets its own cache object (Django's rule) ...
    assert len({id(cache) for cache, _ in results}) == 20
    # ... but one client, so one pool, whose one connection served all twenty requests.
    assert len({id(client) for _, client in results}) == 1
    assert results[0][1]._get_connection_pool(write=True) is pool
    assert pool._created_connections - before <= 1


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL") and not os.environ.get("CI"),
    reason="the Redis cache is configured only with REDIS_URL",
)
def test_one_redis_client_serves_every_command():
    client = caches["default"]._cache
    first = client.get_client("a", write=True)
    assert client.get_client("b", write=True) is first
    assert client.get_client("c") is first  # one server: reads use the same pool
