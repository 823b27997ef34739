import logging
import os

import pytest
from django.conf import settings
from django.core.management.sql import emit_post_migrate_signal
from django.db import connections, transaction
from django.test import TransactionTestCase
from rest_framework.test import APIClient

from .broker_keys import delete_broker_keys
from .demo_cache import demo_organization
from .factories import make_key, make_org

# Collaboration agent threads drop their DB connections as soon as no session runs, so the
# test database can be dropped at the end (tests/organization/mcp and others run sessions too).
settings.COLLAB_IDLE_CLOSE_SECONDS = 0
# The schema fuzz sends thousands of requests with one key; the throttle still runs (its
# cache is exercised), at a rate no test reaches. tests/infrastructure/test_throttling.py lowers it.
settings.API_THROTTLE_RATE = "1000000/min"


@pytest.fixture(autouse=True)
def _root_logger_level_restored():
    """A Celery worker a test starts (celery.contrib.testing) sets the root logger's level and
    leaves it: the tests after it would see no warning in caplog, depending on their order."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


_flush = TransactionTestCase._fixture_teardown

# The tables post_migrate fills (content types, permissions, the beat schedules the apps seed):
# kept between transactional tests while no test changed them, for post_migrate costs ~0.15 s
# (~0.4 s under xdist) and ~400 tests end so. A test that did change them (a fingerprint of
# their rows tells) gets them emptied and made again, as flush would.
_MADE_BY_POST_MIGRATE = ("django_content_type", "auth_permission", "django_celery_beat_")
_fingerprint_of_made_rows: dict[str, str] = {}


def _made_by_post_migrate(table: str) -> bool:
    return table.startswith(_MADE_BY_POST_MIGRATE)


def _fingerprint(cursor, connection, tables: list[str]) -> str:
    parts = [
        f"SELECT '{table}', md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
        f"FROM {connection.ops.quote_name(table)} t"
        for table in tables
    ]
    cursor.execute(" UNION ALL ".join(parts))
    return repr(sorted(cursor.fetchall()))


def _empty_the_database(self):
    """What `flush` does after a transactional test, with DELETE where it says TRUNCATE.

    On PostgreSQL a TRUNCATE of every table takes ~0.4 s (a new file per table and index), a
    DELETE of the few rows a test leaves ~0.02 s. The rest is flush's own: every table emptied
    in one transaction (foreign keys are checked at its end), sequences kept, then post_migrate,
    which makes the content types, permissions and schedules again — only when the test changed
    them (see _MADE_BY_POST_MIGRATE).
    """
    names = self._databases_names(include_mirrors=False)
    if (
        self.available_apps is not None
        or self.serialized_rollback
        or any(connections[name].vendor != "postgresql" for name in names)
    ):
        return _flush(self)
    for name in names:
        connection = connections[name]
        tables = connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        made = sorted(table for table in tables if _made_by_post_migrate(table))
        with transaction.atomic(using=name), connection.cursor() as cursor:
            kept = _fingerprint(cursor, connection, made) == _fingerprint_of_made_rows.get(name)
            for table in tables:
                if not (kept and table in made):
                    cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
        if not kept:
            emit_post_migrate_signal(verbosity=0, interactive=False, db=name)
            with connection.cursor() as cursor:
                _fingerprint_of_made_rows[name] = _fingerprint(cursor, connection, made)


TransactionTestCase._fixture_teardown = _empty_the_database


def pytest_configure(config):
    # Under CI the suite must run on the real services, never fall back to SQLite.
    if os.environ.get("CI") == "true":
        engine = settings.DATABASES["default"]["ENGINE"]
        if "postgresql" not in engine:
            raise pytest.UsageError("CI=true but DATABASE_URL is not PostgreSQL")
        if not settings.REDIS_URL:
            raise pytest.UsageError("CI=true but REDIS_URL is not set")


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves no broker keys in its Redis database (each xdist worker in its own)."""
    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        delete_broker_keys(settings.CELERY_BROKER_URL)


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
    """What seed_demo(slug="demo") makes (run once per process, then copied: tests/demo_cache.py)."""
    return demo_organization()


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


def shared_fixture_scope(item) -> str:
    """The module (or class) of a fixture of that scope, defined in the suite, the test uses."""
    info = getattr(item, "_fixtureinfo", None)
    for name in info.names_closure if info else ():
        definition = (info.name2fixturedefs.get(name) or [None])[-1]
        if definition and definition.baseid and definition.scope in ("class", "module"):
            return definition.baseid
    return ""


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests that share a module- or class-scoped fixture run first.

    xdist's `load` mode hands each worker a first chunk of consecutive tests (a quarter of its
    share), so these land together on one worker and their fixture is set up once, not once per
    worker (test_embedded's running server). Its `loadgroup` mode cannot be used: it keys
    tests by node id, and schemathesis gives all operations of a schema test the same one, so
    it would run one of them. Without xdist the order is the usual one.
    """
    if not hasattr(config, "workerinput"):
        return
    shared = {id(item): shared_fixture_scope(item) for item in items}
    items.sort(key=lambda item: shared[id(item)] == "")  # stable: the rest keep their order
