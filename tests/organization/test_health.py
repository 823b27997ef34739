"""`GET /healthz`: public, reports the database and the broker."""

import os
import shutil
import socket
import subprocess
import time

import pytest
from django.conf import settings

from config import health
from config.celery import app
from tests.tls import self_signed

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def tls_redis(tmp_path):
    """A redis-server speaking TLS only, with a self-signed certificate (as a hosted or
    self-hosted Redis may have), on a free port; stopped after the test."""
    # Under CI it must run: a missing tool fails the test, never skips it.
    unavailable = pytest.fail if os.environ.get("CI") == "true" else pytest.skip
    if not shutil.which("redis-server") or not shutil.which("openssl"):
        unavailable("needs redis-server and openssl")
    cert, key = self_signed(tmp_path, "127.0.0.1")
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            unavailable("redis-server did not start with TLS (built without it?)")
        yield f"rediss://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("query", ["", "?ssl_cert_reqs=none", "?ssl_cert_reqs=CERT_NONE"])
def test_a_tls_broker_is_checked_with_the_tls_options_celery_uses(tls_redis, anon_client, query):
    """/healthz reaches the broker as the workers do, through kombu: a rediss:// URL's options
    (`ssl_cert_reqs=…`, or none: kombu's default is no certificate check) apply, where
    redis-py's own defaults (CERT_REQUIRED) would report a broker every worker uses as down."""
    previous = app.conf["CELERY_BROKER_URL"]
    app.conf["CELERY_BROKER_URL"] = tls_redis + query
    try:
        with app.connection_for_write() as conn:  # what the workers and the outbox do
            conn.ensure_connection(max_retries=1, timeout=5)
            conn.default_channel.client.ping()
        response = anon_client.get("/healthz")
    finally:
        app.conf["CELERY_BROKER_URL"] = previous
        health._broker_connections.clear()
    assert response.status_code == 200, response.json()


def test_a_tls_broker_whose_certificate_the_url_requires_checked_is_unhealthy(
    tls_redis, anon_client
):
    """The other way round: `ssl_cert_reqs=required` and a self-signed certificate fail for
    the workers, so /healthz says so too."""
    previous = app.conf["CELERY_BROKER_URL"]
    app.conf["CELERY_BROKER_URL"] = tls_redis + "?ssl_cert_reqs=required"
    try:
        response = anon_client.get("/healthz")
    finally:
        app.conf["CELERY_BROKER_URL"] = previous
        health._broker_connections.clear()
    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")
