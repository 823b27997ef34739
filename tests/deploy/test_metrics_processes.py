"""`/metrics` under `python -m config.serve` with several server processes (issue 39 §2): the HTTP
and database series of django-prometheus are summed over the processes (multiprocess mode, the
directory config.serve empties at start), so any process answers the same totals."""

import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from tasks.models import Task
from tests.config.test_serve import children, free_port, listening
from tests.config.waiting import wait_for
from tests.tasks.conftest import Cast
from tests.tasks.test_sweep import database_url

BASE_DIR = Path(__file__).resolve().parents[2]
TOKEN = "scrape-several"
REQUESTS = 40
BY_VIEW = "django_http_requests_total_by_view_transport_method"
HEALTHZ = {"view": "healthz", "transport": "http", "method": "GET"}

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"] or not settings.REDIS_URL,
        reason="the server processes share the test database and Redis: needs both",
    ),
]


def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    """One request on a connection of its own (SO_REUSEPORT spreads connections, not requests)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def sample(text: str, name: str, labels: dict) -> float | None:
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return found.value
    return None


def healthz_count_of(directory: Path, pid: int) -> float:
    """What one process wrote of the counter, read from its own file alone."""
    file = directory / f"counter_{pid}.db"
    if not file.exists():
        return 0
    for family in MultiProcessCollector.merge([str(file)], accumulate=True):
        for found in family.samples:
            if found.name == f"{BY_VIEW}_total" and found.labels == HEALTHZ:
                return found.value
    return 0


def write_stale_samples(directory: Path) -> list[Path]:
    """A previous server's counter file: 1000 requests the new server must not report."""
    code = (
        "from prometheus_client import Counter\n"
        f"Counter({BY_VIEW!r}, 'x', ['view', 'transport', 'method'])"
        ".labels('healthz', 'http', 'GET').inc(1000)\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    stale = list(directory.glob("counter_*.db"))
    assert stale
    return stale


def test_requests_spread_over_two_processes_are_all_counted_by_any_of_them(tmp_path):
    cast = Cast()
    Task.objects.create(organization=cast.org, title="counted from the database")
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    stale = write_stale_samples(metrics_dir)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("TEST_DATABASE_NAME", None)
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "METRICS_TOKEN": TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "SERVE_LOG_LEVEL": "warning",
    }
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 (closed with the process)
    server = subprocess.Popen(
        [sys.executable, "-m", "config.serve", "--port", str(port), "--workers", "2"],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: listening(port), 60, "the server")
        workers = wait_for(lambda: len(children(server.pid)) == 2 and children(server.pid), 30, "2")
        assert not any(file.exists() for file in stale), "a previous server's samples were kept"

        for _ in range(REQUESTS):
            assert get(port, "/healthz")[0] == 200

        per_process = [healthz_count_of(metrics_dir, pid) for pid in workers]
        assert sum(per_process) == REQUESTS
        assert all(count > 0 for count in per_process), per_process  # both served some

        assert get(port, "/metrics")[0] == 401
        for _ in range(6):  # each on a new connection: whichever process answers, the same
            status, text = get(port, "/metrics", TOKEN)
            assert status == 200
            assert sample(text, f"{BY_VIEW}_total", HEALTHZ) == REQUESTS
            assert sample(text, "django_db_execute_total", {"vendor": "postgresql"}) > 0
            tasks = {"organization": "acme", "status": "queued"}
            assert sample(text, "agent_org_tasks", tasks) == 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        finally:
            server.kill()
            log.close()
