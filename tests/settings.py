"""The test suite's settings: config.settings with a test-only SECRET_KEY.

`pytest` (pyproject's DJANGO_SETTINGS_MODULE) and `python manage.py test` (manage.py) load this
module. The key goes into the environment before config.settings reads it, so the Celery
workers, servers and management commands the tests start as subprocesses get it too.

Under pytest-xdist (`make test-fast`, `make test`) each worker process gets a test database of
its own (pytest-django adds `_gw0`, `_gw1` … to its name) and, from here, a Redis database of its
own: gwN uses the database N above the one REDIS_URL names, so one worker's cache, Celery queues
and `flushdb` never touch another's. The subprocesses a test starts inherit the rewritten URL.
"""

import os
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "test-only-insecure-key-never-use-outside-the-test-suite")
# Off, so nothing is counted: hundreds of tests answer 401 to 127.0.0.1, and the Redis counter
# outlives the run (a server started after it, e.g. tests/prod_install_check.py, would find
# 127.0.0.1 locked out). tests/infrastructure/test_auth_throttling.py turns it on for itself.
os.environ.setdefault("AUTH_FAILURE_LIMIT", "0")

# Set once the URLs are this worker's, so a child process reading this module again keeps them.
_REWRITTEN_FOR = "TESTS_REDIS_DB_OF_XDIST_WORKER"


def _redis_database_of_this_xdist_worker() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1 … (unset without xdist)
    if not worker.startswith("gw") or os.environ.get(_REWRITTEN_FOR) == worker:
        return
    index = int(worker.removeprefix("gw"))
    for var in ("REDIS_URL", "CELERY_BROKER_URL"):
        url = os.environ.get(var, "")
        if not url.startswith(("redis://", "rediss://")):
            continue
        parts = urlsplit(url)
        database = int(parts.path.strip("/") or 0) + index
        if database > 15:  # a Redis server has 16 databases unless its config says more
            raise RuntimeError(
                f"xdist worker {worker} would use Redis database {database} of {var}={url}: "
                "run fewer workers (-n, TEST_WORKERS) or start from a lower database"
            )
        os.environ[var] = urlunsplit(parts._replace(path=f"/{database}"))
    os.environ[_REWRITTEN_FOR] = worker


_redis_database_of_this_xdist_worker()

from django.conf import global_settings  # noqa: E402

from config.settings import *  # noqa: E402,F403

# Passwords are hashed with MD5 here: the default PBKDF2 takes ~0.4 s per user the tests make.
# The default hashers stay listed so a hash made by a subprocess (config.settings) still checks.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]
