import os

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tasks.demo import seed_demo

from .factories import make_key, make_org

# Collaboration agent threads drop their DB connections as soon as no session runs, so the
# test database can be dropped at the end (tests/mcp and others run sessions too).
settings.COLLAB_IDLE_CLOSE_SECONDS = 0
# The schema fuzz sends thousands of requests with one key; the throttle still runs (its
# cache is exercised), at a rate no test reaches. tests/organization/test_throttling.py lowers it.
settings.API_THROTTLE_RATE = "1000000/min"


def pytest_configure(config):
    # Under CI the suite must run on the real services, never fall back to SQLite.
    if os.environ.get("CI") == "true":
        engine = settings.DATABASES["default"]["ENGINE"]
        if "postgresql" not in engine:
            raise pytest.UsageError("CI=true but DATABASE_URL is not PostgreSQL")
        if not settings.REDIS_URL:
            raise pytest.UsageError("CI=true but REDIS_URL is not set")


def requires_postgres():
    return pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"]
        and os.environ.get("CI") != "true",
        reason="needs PostgreSQL row locks (set DATABASE_URL)",
    )


class KeyClient(APIClient):
    """An API client that sends `Authorization: Bearer <key>` on every request."""

    def __init__(self, key: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if key:
            self.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")


@pytest.fixture
def demo(db):
    return seed_demo(slug="demo")


@pytest.fixture
def other_org(db):
    return make_org("other")


@pytest.fixture
def agent_client(db):
    """agent_client(agent) → a client authenticated with a fresh key of that agent."""

    def build(agent):
        return KeyClient(make_key(agent.organization, agent))

    return build


@pytest.fixture
def org_client(db):
    """org_client(org) → a client authenticated with an organization key (a human admin)."""

    def build(org):
        return KeyClient(make_key(org))

    return build


@pytest.fixture
def anon_client():
    return APIClient()


def agent_of(org, handle):
    return org.agents.get(handle=handle)
