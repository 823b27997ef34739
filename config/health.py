"""`GET /healthz`: is the database reachable, is the broker reachable."""

import os

import redis
from django.db import connection
from django.http import JsonResponse


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any failure means "not healthy", reported, not raised
        return f"error: {exc.__class__.__name__}"


# One Redis client per broker URL, kept for the life of the process: a health check every few
# seconds from a load balancer must not open (and tear down) a broker connection each time.
_redis_clients: dict[str, redis.Redis] = {}


def _redis_client(url: str) -> redis.Redis:
    client = _redis_clients.get(url)
    if client is None:
        client = redis.Redis.from_url(
            url,
            socket_connect_timeout=2,
            socket_timeout=2,
            client_name=f"agent-org-health-{os.getpid()}",  # seen in CLIENT LIST
        )
        _redis_clients[url] = client
    return client


def check_broker() -> str:
    from config.celery import app

    try:
        url = app.connection_for_write().as_uri(include_password=True)
        if url.startswith(("redis://", "rediss://")):
            _redis_client(url).ping()
        else:  # the embedded filesystem broker: a directory, no connection to keep
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}"


def healthz(request):
    checks = {"database": check_database(), "broker": check_broker()}
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )
