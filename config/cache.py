"""Django's Redis cache with one client per process, and one `redis.Redis` per pool.

Two costs of the stock backend, both paid on every API request (the throttle reads and writes
the cache):

- Django keeps one cache object per *context* (`caches` is a contextvar-based local). Served as
  WSGI inside ASGI through a2wsgi (as config/asgi.py once did), every request ran in a fresh
  copy of the context, so each request built a new client, a new pool and a new Redis
  connection.
- Its client builds a new `redis.Redis` for every command, and each one fills its table of ~100
  response callbacks: about a third of the CPU of a small cached request.

Here the client is one per location and options, and it keeps one `redis.Redis` per pool
(redis-py's clients and pools are thread-safe).
"""

import json
import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_clients: dict[str, RedisCacheClient] = {}
_lock = threading.Lock()


class ReusingRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._redis_of_pool = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._redis_of_pool.get(id(pool))
        if client is None:
            client = self._redis_of_pool[id(pool)] = self._client(connection_pool=pool)
        return client


class SharedPoolRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusingRedisCacheClient
        self._client_key = json.dumps([self._servers, self._options], sort_keys=True, default=str)

    @property
    def _cache(self):
        key = self._client_key
        client = _clients.get(key)
        if client is None:
            with _lock:
                client = _clients.get(key)
                if client is None:
                    client = _clients[key] = self._class(self._servers, **self._options)
        return client
