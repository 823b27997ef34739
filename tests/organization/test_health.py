"""`GET /healthz`: public, reports the database and the broker."""

import pytest
from django.conf import settings

from config.celery import app

pytestmark = pytest.mark.django_db


def test_health_reports_database_and_broker_ok(anon_client):
    response = anon_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


def test_under_ci_the_broker_checked_is_the_real_redis():
    if not settings.REDIS_URL:
        pytest.skip("REDIS_URL not set: the embedded filesystem broker is checked instead")
    assert app.conf.broker_url.startswith("redis://")


def test_an_unreachable_broker_makes_it_503(anon_client):
    # A real connection attempt to a port where nothing listens, not a mock.
    # celery 5.6 reads the Django namespace's key (CELERY_BROKER_URL) before `broker_url`.
    previous = app.conf["CELERY_BROKER_URL"]
    app.conf["CELERY_BROKER_URL"] = "redis://127.0.0.1:1/0"
    try:
        response = anon_client.get("/healthz")
    finally:
        app.conf["CELERY_BROKER_URL"] = previous
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["database"]) == ("degraded", "ok")
    assert body["broker"].startswith("error")


def test_the_broker_check_reuses_its_connection(anon_client):
    """A load balancer polls /healthz every few seconds: no new broker connection per call."""
    import os

    import redis

    if not settings.REDIS_URL:
        pytest.skip("REDIS_URL not set: the embedded filesystem broker keeps no connection")
    server = redis.Redis.from_url(settings.REDIS_URL)
    name = f"agent-org-health-{os.getpid()}"

    def health_connections() -> set[int]:
        return {c["id"] for c in server.client_list() if c["name"] == name}

    assert anon_client.get("/healthz").status_code == 200
    first = health_connections()
    for _ in range(5):
        assert anon_client.get("/healthz").status_code == 200
    assert len(first) == 1
    assert health_connections() == first
    server.close()
