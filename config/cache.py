"""Django's Redis cache with one client per process and one `redis.Redis` per pool: the stock
backend builds a client per context and a `redis.Redis` per command, on every API request."""

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
