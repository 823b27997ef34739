"""DATABASES from DATABASE_URL, with the pool, prepared statements and SQLite's locking."""

from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.settings.base import VAR_DIR
from config.settings.environment import env_bool, env_float, env_int, env_str


# DATABASE_URL picks the database; SQLite under var/ is the zero-setup default.
def parse_database_url(url: str) -> dict:
    """dj-database-url's reading of DATABASE_URL; a URL it cannot read stops start-up naming the
    variable (not dj-database-url's bare traceback), and never quoting the URL: it may hold a
    password."""
    example = "e.g. postgres://user@127.0.0.1:5432/agent_org or sqlite:////srv/agent-org/db.sqlite3"
    try:
        database = dj_database_url.parse(url)
    except dj_database_url.UnknownSchemeError:
        scheme = urlsplit(url).scheme if "://" in url else ""
        raise ImproperlyConfigured(
            f"DATABASE_URL: unknown scheme {scheme + '://' if scheme else '(none)'}: use postgres://, "
            f"postgresql:// or sqlite:///, {example}"
        ) from None
    except ValueError:
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a URL dj-database-url can read (a port that is not a number, "
            f"a character of the password not %-quoted?), {example}"
        ) from None
    if database["ENGINE"] == "django.db.backends.sqlite3" and database["NAME"] in ("", ":memory:"):
        # The server, the worker and beat would each have an empty database of their own.
        raise ImproperlyConfigured(
            "DATABASE_URL: an SQLite URL needs a file (sqlite:///relative/path or "
            "sqlite:////absolute/path); an in-memory database is one per process."
        )
    return database


DATABASES = {
    "default": parse_database_url(env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"))
}
# Connecting costs more than a whole API request (bench/README.md), so connections are reused:
# on PostgreSQL through psycopg's pool (DATABASE_POOL, on by default: safe under the threads of
# the ASGI server, where per-thread persistent connections pile up), elsewhere kept open for
# CONN_MAX_AGE seconds. The two are exclusive: Django refuses persistent pooled connections.
_POSTGRESQL = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
DATABASE_POOL = _POSTGRESQL and env_bool("DATABASE_POOL", True)
if DATABASE_POOL:
    if env_int("CONN_MAX_AGE", 0, minimum=0):
        raise ImproperlyConfigured(
            "CONN_MAX_AGE and DATABASE_POOL exclude each other: set DATABASE_POOL=false to keep "
            "connections per thread, or leave CONN_MAX_AGE unset to use the pool."
        )
    _pool_min = env_int("DATABASE_POOL_MIN_SIZE", 2, minimum=0)
    _pool_max = env_int("DATABASE_POOL_MAX_SIZE", 20, minimum=1)
    if _pool_min > _pool_max:
        # psycopg_pool would refuse it only at the first query: a 500 on every request.
        raise ImproperlyConfigured(
            f"DATABASE_POOL_MIN_SIZE ({_pool_min}) must not exceed DATABASE_POOL_MAX_SIZE "
            f"({_pool_max})."
        )
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": _pool_min,
        "max_size": _pool_max,
        # Seconds a request waits for a free connection before it fails (503, Retry-After).
        "timeout": env_float("DATABASE_POOL_TIMEOUT", 10, minimum=0.1),
    }
    # Django's backend whose pool skips connections the server closed (a restart left one 500
    # per pooled connection): config/postgresql/base.py.
    DATABASES["default"]["ENGINE"] = "config.postgresql"
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("CONN_MAX_AGE", 60, minimum=0)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Parameters bound by the server, and a statement a connection has run 5 times prepared
# (Django leaves psycopg's preparing off): PostgreSQL then skips parsing and planning, most of a
# small query's cost (bench/api.py). DATABASE_PREPARED=false turns both off (e.g. behind a
# transaction-mode PgBouncer without prepared-statement support).
if _POSTGRESQL and env_bool("DATABASE_PREPARED", True):
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=5
    )
# PostgreSQL compiles a plan to machine code (JIT) once its estimated cost passes
# jit_above_cost, which a big organization's statements all do, and compiling costs more than the
# statement itself on its index (bench/README.md, bigorg). The service's statements are short
# reads and writes, not reports: JIT off unless DATABASE_JIT=true.
# (After any `options` DATABASE_URL gives.)
if _POSTGRESQL and not env_bool("DATABASE_JIT", False):
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = f"{_options.get('options', '')} -c jit=off".strip()
# Lets several test runs share one PostgreSQL server without dropping each other's database.
if env_str("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
# The backends counted by django-prometheus (connections, statements, errors, durations on
# /metrics); config.postgresql is one already.
DATABASES["default"]["ENGINE"] = {
    "django.db.backends.postgresql": "django_prometheus.db.backends.postgresql",
    "django.db.backends.sqlite3": "django_prometheus.db.backends.sqlite3",
}.get(DATABASES["default"]["ENGINE"], DATABASES["default"]["ENGINE"])
if _SQLITE:
    # SQLite serialises writers; a busy timeout lets the worker and the server share the file.
    # A transaction takes the write lock as it begins (IMMEDIATE): one that read first and then
    # wrote could not upgrade its lock while another process wrote, and failed at once ("database
    # is locked") without waiting. WAL lets readers go on while one writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    )
