"""Fixtures of the MCP tests: a live server of the whole ASGI app on 127.0.0.1, and keys.

The server runs in a thread of the test process against the test database, so the tests
that use it commit their data (`django_db(transaction=True)`).
"""

import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.demo_cache import demo_organization
from tests.factories import make_key

from .live import LiveServer

BASE_DIR = Path(settings.BASE_DIR)


@pytest.fixture
def live_url(transactional_db):
    with LiveServer() as server:
        yield server.url


@pytest.fixture
def demo_org(transactional_db):
    return demo_organization()


@pytest.fixture
def key_of(transactional_db):
    """key_of(org, handle=None) → a fresh key: the agent's, or the organization's."""

    def build(org, handle=None):
        agent = org.agents.get(handle=handle) if handle else None
        return make_key(org, agent)

    return build


def database_url() -> str | None:
    """The test database as a DATABASE_URL, for a subprocess; None for in-memory SQLite."""
    db = settings.DATABASES["default"]
    if "postgresql" in db["ENGINE"]:
        auth = db.get("USER") or ""
        if db.get("PASSWORD"):
            auth += f":{db['PASSWORD']}"
        return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    name = str(db["NAME"])
    if "memory" in name or name.startswith("file:"):
        return None
    return f"sqlite:///{name}"


@pytest.fixture
def subprocess_env(transactional_db):
    url = database_url()
    if url is None:
        pytest.skip("the test database is in-memory SQLite: a subprocess cannot share it")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["DATABASE_URL"] = url
    env["PYTHONPATH"] = str(BASE_DIR)
    env.pop("AGENT_ORG_KEY", None)
    return env


@pytest.fixture
def worker(transactional_db):
    """A real Celery worker (solo pool, a thread of this process) that closes its connections.

    The solo worker runs tasks in its own thread, whose database connection would otherwise
    outlive the test and hold the test database (later tests count its sessions).
    """
    from celery.contrib.testing.worker import start_worker
    from celery.signals import task_postrun
    from django.db import connections

    from config.celery import app as celery_app

    def close(**kwargs):
        connections.close_all()

    task_postrun.connect(close, weak=False)
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        task_postrun.disconnect(close)
        # The collaboration runner's agent threads keep theirs too.
        from collaboration.runner import close_thread_connections

        close_thread_connections()
