"""Settings, read from the environment (healthchecks' one-module style).

Every default is the embedded one that `make run` uses on a fresh machine:
SQLite under var/, a filesystem broker, the offline LLM provider.
"""

import json
import logging
import math
import os
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

# Strict parsing (healthchecks' `envbool`/`envint` in hc/settings.py): a value we do not understand
# stops start-up with a message naming the variable, instead of quietly meaning "off" or crashing
# later with a bare ValueError. An unset or empty variable means the default. Every variable read
# here is listed in docs/configuration.md (tests/test_configuration.py compares the two).
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def env_str(name: str, default: str = "") -> str:
    """The variable's value without surrounding spaces; unset, empty or blank: the default."""
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in TRUE_WORDS:
        return True
    if raw.lower() in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: use true or false (or 1/0, yes/no, on/off).")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise ImproperlyConfigured(f"{name}={raw!r}: must be a whole number, e.g. {default}.")
    value = int(raw)
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at most {maximum}.")
    return value


# The beat's interval schedules keep their seconds in an integer column (django_celery_beat's
# IntervalSchedule.every), and timedelta stops at 999999999 days: a larger interval failed
# start-up with OverflowError, or the first migrate with a database error.
MAX_INTERVAL_SECONDS = 2**31 - 1


def env_interval(name: str, default: int) -> timedelta:
    """Seconds (a beat job's interval, a grace) as a timedelta: a whole number from 1 to
    MAX_INTERVAL_SECONDS."""
    return timedelta(seconds=env_int(name, default, minimum=1, maximum=MAX_INTERVAL_SECONDS))


def env_float(name: str, default: float, *, minimum: float = 0) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", raw):
        raise ImproperlyConfigured(f"{name}={raw!r}: must be a number, e.g. {default:g}.")
    value = float(raw)
    if not math.isfinite(value):  # 1e999: infinity, which later failed int() with OverflowError
        raise ImproperlyConfigured(f"{name}={raw!r}: must be a number, e.g. {default:g}.")
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum:g}.")
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [v.strip() for v in env_str(name, default).split(",") if v.strip()]


# Where the embedded setup keeps its state; an empty VAR_DIR is the default, as in `make run`
# (config/embedded.py), not the current directory.
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))


def make_var_dir(path: Path) -> None:
    """A directory under VAR_DIR, made if missing; one that cannot be (VAR_DIR a file, not
    writable) stops start-up naming VAR_DIR, not with a traceback of mkdir."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"VAR_DIR={str(VAR_DIR)!r}: cannot create {path}: {exc.strerror or exc}. Set VAR_DIR "
            "to a directory this user can write."
        ) from exc


DEBUG = env_bool("DEBUG")


def read_secret_key() -> str:
    """SECRET_KEY, else the file SECRET_KEY_FILE names, else var/secret_key if `make run` made it.

    Without either, only DEBUG may fall back to a fixed key: a known key lets anyone forge
    sessions, so a production server refuses to start instead. The test suite sets its own
    (tests/settings.py).
    """
    key = env_str("SECRET_KEY")
    path = env_str("SECRET_KEY_FILE")
    if not key and not path and (VAR_DIR / "secret_key").is_file():
        # The key `make run` generated: management commands typed in the same checkout use it.
        path = str(VAR_DIR / "secret_key")
    if not key and path:
        try:
            key = Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE={path} cannot be read: {exc}") from exc
    if key:
        return key
    if DEBUG:
        return "dev-only-insecure-key-set-SECRET_KEY-in-production"
    raise ImproperlyConfigured(
        "SECRET_KEY is not set: set SECRET_KEY (or SECRET_KEY_FILE, a file holding it) to a "
        "long random string, e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(50))'. "
        "With DEBUG=1 a development key is used instead."
    )


SECRET_KEY = read_secret_key()

# The service's public address, e.g. https://agents.example.com. When set, every absolute URL
# we hand out (A2A cards, Location headers) is built from it, never from the request's Host.
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL").rstrip("/")
_public = urlsplit(PUBLIC_BASE_URL)
if PUBLIC_BASE_URL and (
    _public.scheme not in ("http", "https")
    or not _public.hostname
    or _public.path not in ("", "/")
    or _public.query
    or _public.fragment
):
    raise ImproperlyConfigured(
        f"PUBLIC_BASE_URL={PUBLIC_BASE_URL!r} must be scheme://host[:port] with http or https and "
        "nothing after it, e.g. https://agents.example.com"
    )
PUBLIC_HOST = (
    (f"[{_public.hostname}]" if ":" in _public.hostname else _public.hostname)
    if PUBLIC_BASE_URL
    else ""
)
PUBLIC_ORIGIN = f"{_public.scheme}://{_public.netloc}" if PUBLIC_BASE_URL else ""
# Django checks Host against this list; `*` would let any Host header through (and with it into
# URLs built from the request). The default is this machine plus PUBLIC_BASE_URL's host.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or [
    "localhost",
    "127.0.0.1",
    "[::1]",
    *([PUBLIC_HOST] if PUBLIC_HOST else []),
]
# Browser origins /mcp accepts (the MCP spec: servers must check Origin, against DNS rebinding
# and cross-site pages). `scheme://host:*` matches any port; requests without Origin (clients
# that are not browsers) pass. This service's own public origin is always allowed.
MCP_ALLOWED_ORIGINS = env_list(
    "MCP_ALLOWED_ORIGINS", "http://localhost:*,http://127.0.0.1:*,http://[::1]:*"
) + ([PUBLIC_ORIGIN] if PUBLIC_ORIGIN else [])
# /mcp keeps no session between requests by default, so that every worker of `config.serve`
# can answer every request; false gives stateful sessions (then serve one worker only).
MCP_STATELESS = env_bool("MCP_STATELESS", True)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS") + ([PUBLIC_ORIGIN] if PUBLIC_ORIGIN else [])

INSTALLED_APPS = [
    # django.contrib.admin, with the console's site (its index is the dashboard) as admin.site.
    "console.apps.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    # Who changed what (issue 13 §3): the historical rows and the admin's history pages.
    "simple_history",
    # The admin login's lockout after repeated failures (ADMIN_LOGIN_FAILURE_LIMIT).
    "axes",
    "infrastructure",
    "organization",
    "tasks",
    "costs",
    "collaboration",
    "runtime",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's static files under uvicorn/gunicorn without a separate web server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # /api/ only: 429 for a client address past AUTH_FAILURE_LIMIT failed authentications.
    "infrastructure.middleware.AuthFailureThrottleMiddleware",
    # /api/ only: 413 for an oversize body, 400 for NUL or lone surrogates in path or query.
    "infrastructure.middleware.ApiInputMiddleware",
    # The pages (admin, console): 400 for NUL or lone surrogates in path, query or form fields.
    "infrastructure.middleware.PageInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Hands the request to the historical rows: who changed what (organization/history.py).
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Answers a locked-out admin login (django-axes); last, as its documentation asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


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
# Lets several test runs share one PostgreSQL server without dropping each other's database.
if env_str("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite serialises writers; a busy timeout lets the worker and the server share the file.
    # A transaction takes the write lock as it begins (IMMEDIATE): one that read first and then
    # wrote could not upgrade its lock while another process wrote, and failed at once ("database
    # is locked") without waiting. WAL lets readers go on while one writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# WhiteNoise warns on every request when the folder is missing (before collectstatic ran).
make_var_dir(STATIC_ROOT)

LOGIN_URL = "/admin/login/"

# The admin login locks a client address out after ADMIN_LOGIN_FAILURE_LIMIT failed logins, for
# ADMIN_LOGIN_LOCKOUT_SECONDS (django-axes: https://django-axes.readthedocs.io/). Its backend
# only watches; Django's checks the password.
AUTHENTICATION_BACKENDS = [
    "organization.auth.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("ADMIN_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(seconds=env_int("ADMIN_LOGIN_LOCKOUT_SECONDS", 900, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_USERNAME_FORM_FIELD = "username"  # the admin login form's (else a lazy object per process)
# Lifted early with `manage.py axes_reset`; the attempts stay out of the console's admin.
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False  # no banner in the log of every process that starts (workers, commands)

# The admin's history pages read the past; they never write it back (organization/admin/history.py).
SIMPLE_HISTORY_REVERT_DISABLED = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "organization.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["organization.permissions.IsOrganizationCaller"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Caps `limit` at API_MAX_PAGE_SIZE; 400 for a limit/offset that is not a whole number.
    "DEFAULT_PAGINATION_CLASS": "infrastructure.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    # JSON only: advertising form/multipart bodies made openapi-python-client generate modules
    # that do not import (its issue #1451). The parser carries the input guard
    # (NUL, lone surrogates, out-of-range numbers, deep nesting → 400).
    "DEFAULT_PARSER_CLASSES": ["infrastructure.parsers.JSONParser"],
    # orjson for JSON (organization/renderers.py); the browsable API as before.
    "DEFAULT_RENDERER_CLASSES": [
        "infrastructure.renderers.OrjsonRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's, with a short cut for */* and application/json (organization/negotiation.py).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "infrastructure.negotiation.ContentNegotiation",
    # Per API key (or session user); the rate is API_THROTTLE_RATE, read on every request.
    "DEFAULT_THROTTLE_CLASSES": ["infrastructure.throttling.ApiKeyRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "infrastructure.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Agent Org API",
    "DESCRIPTION": "An organization for AI agents: roster, hierarchy, tasks, collaboration.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default, kept
        "organization.schema.every_operation_answers_its_limits",
    ],
}

# Redis when REDIS_URL is set (production, tests); otherwise a broker that needs no server.
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    # The broker (kombu) and the cache (redis-py) both read it: redis-py knows redis:// and
    # rediss:// only, and in lower case. Anything else left the broker working and the cache
    # failing on every request, the throttle quietly off (it lets a request through when its
    # cache fails).
    _redis_scheme, _, _redis_rest = REDIS_URL.partition("://")
    if _redis_scheme.lower() not in ("redis", "rediss") or not _redis_rest:
        raise ImproperlyConfigured(
            f"REDIS_URL: scheme {_redis_scheme + '://' if _redis_rest else '(none)'} is not "
            "redis:// or rediss://, which the broker and the cache both read. For a broker "
            "through Sentinel or a socket, set CELERY_BROKER_URL to it and REDIS_URL to a "
            "redis:// URL for the cache (or leave REDIS_URL unset)."
        )
    REDIS_URL = f"{_redis_scheme.lower()}://{_redis_rest}"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("out", "processed", "control"):
        make_var_dir(_broker_dir / _sub)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "data_folder_processed": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
    }
else:
    # Redis re-delivers unacked work after visibility_timeout: it must exceed the longest
    # session (max_agents x agent_timeout + synthesis), or a live session runs twice.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1),
    }
    if CELERY_BROKER_URL.lower().startswith(
        ("redis://", "rediss://", "redis+socket://", "sentinel://")
    ):
        # Work is taken by priority, 0 first (a manager's run before its reports': what it hands
        # out keeps the others busy), and a worker takes a message only when a thread of it is
        # free: a more urgent message sent later is then not stuck behind ones it reserved.
        CELERY_WORKER_DISABLE_PREFETCH = env_bool("CELERY_WORKER_DISABLE_PREFETCH", True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Checked here: logging.config would stop start-up with a ValueError naming neither.
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in logging.getLevelNamesMapping():
    raise ImproperlyConfigured(
        f"LOG_LEVEL={os.environ['LOG_LEVEL']!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # The MCP SDK logs every stateless request ("Terminating session: None") and the HTTP
    # clients every call at INFO: warnings only, unless LOG_LEVEL asks for DEBUG. The LLM and
    # MCP SDKs use httpx2 (logger "httpx2", core "httpcore2"), others httpx.
    "loggers": {
        name: {"level": "DEBUG" if LOG_LEVEL == "DEBUG" else "WARNING"}
        for name in ("mcp", "httpx", "httpcore", "httpx2", "httpcore2")
    },
}

# Hands `python manage.py test` over to pytest, so both run the same suite.
TEST_RUNNER = "config.test_runner.PytestRunner"

STALE_CHECK_INTERVAL = env_interval("STALE_CHECK_SECONDS", 60)
# How often the beat sends the outbox messages that could not be sent at commit (broker away):
# the longest a queued session or webhook waits once the broker is back (organization/outbox.py).
OUTBOX_RELAY_INTERVAL = env_interval("OUTBOX_RELAY_SECONDS", 10)
# How long a message never tried is left to the commit hook of its transaction before the relay
# takes it (a process that died before its hook ran): shorter recovers such a message sooner,
# but a hook slower than it sends its message twice.
OUTBOX_HOOK_GRACE = env_interval("OUTBOX_HOOK_GRACE_SECONDS", 30)

# --- collaboration ---
# LLM provider for agents without their own setting: offline | openai | anthropic. When unset,
# openai if OPENAI_API_KEY is set, else anthropic if ANTHROPIC_API_KEY is, else offline.
# The keys themselves are read by the SDKs from the environment only, never stored here.
LLM_PROVIDER = env_str("LLM_PROVIDER").lower()
LLM_MODEL = env_str("LLM_MODEL")
# Used when neither the agent, the session nor LLM_MODEL names a model.
LLM_DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "offline": "offline",
}


def env_prices(name: str) -> dict[str, dict[str, Decimal]]:
    """LLM_PRICES: `{"<provider>/<model>": {"input": <USD per 1M tokens>, "output": <…>}}` for
    models genai-prices does not know (a local Ollama or vLLM model); it wins over the table."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    example = '{"openai/llama3:8b": {"input": 0.1, "output": 0.2}}'
    try:
        data = json.loads(raw, parse_float=Decimal, parse_int=Decimal)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: not JSON ({exc}); e.g. {example}") from exc
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{name}: must be a JSON object, e.g. {example}")
    prices = {}
    for key, price in data.items():
        if "/" not in key:
            raise ImproperlyConfigured(f"{name}: {key!r} must read <provider>/<model>.")
        if (
            not isinstance(price, dict)
            or set(price) != {"input", "output"}
            or not all(isinstance(v, Decimal) and v >= 0 for v in price.values())
        ):
            raise ImproperlyConfigured(
                f'{name}: {key!r} must be {{"input": <USD per 1M tokens>, "output": <…>}} '
                "with numbers of at least 0."
            )
        prices[key] = price
    return prices


LLM_PRICES = env_prices("LLM_PRICES")
# How long a model call's reservation is held past its deadline before the sweep counts it
# spent at its worst case (its worker died before settling it).
COSTS_RESERVATION_GRACE = env_int("COSTS_RESERVATION_GRACE", 600, minimum=60)
COSTS_SWEEP_INTERVAL = env_interval("COSTS_SWEEP_INTERVAL", 300)
# The most one self-reported call (POST /api/usage, report_usage) may cost, as priced or as
# claimed: an agent's word is bounded (docs/costs.md, "Self-reported calls"); at most 1000.
USAGE_REPORT_MAX_COST_USD = Decimal(str(env_float("USAGE_REPORT_MAX_COST_USD", 100.0)))

# Seed 004's limits; a session may only lower them (max_parallel, agent_timeout, max_total_tokens).
COLLAB_MAX_AGENTS = env_int("COLLAB_MAX_AGENTS", 5, minimum=1)
COLLAB_MAX_PARALLEL = env_int("COLLAB_MAX_PARALLEL", 3, minimum=1)
COLLAB_AGENT_TIMEOUT = env_float("COLLAB_AGENT_TIMEOUT", 300.0)
COLLAB_MAX_TOTAL_TOKENS = env_int("COLLAB_MAX_TOTAL_TOKENS", 200_000, minimum=1)
# The SDKs' own retries (429/5xx/connection errors) inside one agent's timeout.
COLLAB_PROVIDER_MAX_RETRIES = env_int("COLLAB_PROVIDER_MAX_RETRIES", 2, minimum=0)
# Model calls a specialist with tools (agents[].config.tools) may make before it must have
# answered (collaboration/toolloop.py); all of them within its agent_timeout.
COLLAB_AGENT_MAX_TURNS = env_int("COLLAB_AGENT_MAX_TURNS", 8, minimum=1)
# Coordinator synthesis / plan defaults (seed 004: temperature 0.3 for synthesis).
COLLAB_COORDINATOR_TEMPERATURE = env_float("COLLAB_COORDINATOR_TEMPERATURE", 0.3)
# Seed 004's tool config (`default_mode`, `default_synthesis`, `coordinator.model`) for a start
# that names none. Checked at start-up (collaboration/apps.py): a value it does not know stops
# the server and the workers with a message, rather than failing every session later.
COLLAB_DEFAULT_MODE = env_str("COLLAB_DEFAULT_MODE", "parallel")
COLLAB_DEFAULT_SYNTHESIS = env_str("COLLAB_DEFAULT_SYNTHESIS", "coordinator")
# The coordinator's model on the default provider (as LLM_MODEL is the agents'); empty: LLM_MODEL.
COLLAB_COORDINATOR_MODEL = env_str("COLLAB_COORDINATOR_MODEL")
# Sessions one organization may start in any hour, whichever door (REST, tool, MCP, admin);
# above it a start answers 429 `rate_limited` with Retry-After. Checked at start-up too.
_starts = env_str("COLLAB_MAX_STARTS_PER_HOUR", "120")
COLLAB_MAX_STARTS_PER_HOUR = int(_starts) if _starts.isdecimal() else _starts
# Worst case of one session: a hierarchical plan tried twice, every agent one after the other
# (sequential), then synthesis — (max_agents + 3) LLM calls of at most agent_timeout each, plus
# slack for the database. It is the session task's hard time limit, and Redis' visibility_timeout
# must exceed it (checked at start-up in collaboration/apps.py) or a live session is re-delivered.
COLLAB_SESSION_TIME_LIMIT = env_int(
    "COLLAB_SESSION_TIME_LIMIT", int((COLLAB_MAX_AGENTS + 3) * COLLAB_AGENT_TIMEOUT + 30), minimum=1
)
# --- tasks ---
# Seed 001's wait estimate when an expert has no completed task yet (stated in the API docs).
TASKS_DEFAULT_COMPLETION_SECONDS = env_int("TASKS_DEFAULT_COMPLETION_SECONDS", 3600, minimum=1)
# Rows per transaction of the stale-queue sweep: fewer queries per task, shorter locks per batch.
TASKS_SWEEP_BATCH_SIZE = env_int("TASKS_SWEEP_BATCH_SIZE", 2000, minimum=1)
# Webhook retries: attempt n+1 waits base * 2**(n-1) seconds; tests shorten the base.
TASKS_WEBHOOK_MAX_RETRIES = env_int("TASKS_WEBHOOK_MAX_RETRIES", 5, minimum=0)
TASKS_WEBHOOK_RETRY_BASE_SECONDS = env_float("TASKS_WEBHOOK_RETRY_BASE_SECONDS", 10.0)
TASKS_WEBHOOK_TIMEOUT_SECONDS = env_float("TASKS_WEBHOOK_TIMEOUT_SECONDS", 5.0)
# Webhooks may only reach public addresses (no loopback, private, link-local, reserved: SSRF);
# true lifts that for local development and the test suite. http/https is required either way.
WEBHOOK_ALLOW_PRIVATE_NETWORKS = env_bool("WEBHOOK_ALLOW_PRIVATE_NETWORKS")
# A re-delivered session task backs off while another worker's heartbeat is younger than this.
COLLAB_LEASE_SECONDS = env_float("COLLAB_LEASE_SECONDS", 30.0)
# As RUNTIME_MAX_ATTEMPTS, for a collaboration session: failed once started this many times.
COLLAB_MAX_ATTEMPTS = env_int("COLLAB_MAX_ATTEMPTS", 5, minimum=1)
# How often beat sends again the sessions a worker lost (a broker without re-delivery, such as
# the embedded filesystem one, forgets a message its worker took and died with).
COLLAB_SWEEP_INTERVAL = env_interval("COLLAB_SWEEP_SECONDS", 60)
# A worker's agent threads close their database connections this long after its last session
# ends (0: at once; the test suite uses 0 so that its database can be dropped).
COLLAB_IDLE_CLOSE_SECONDS = env_float("COLLAB_IDLE_CLOSE_SECONDS", 30.0)

# --- runtime (managed agents, issue 11 §2) ---
# A run whose worker has not renewed its lease for this long is resumed by another worker (the
# sweep sends it again); a second delivery of a live run backs off this long.
RUNTIME_LEASE_SECONDS = env_float("RUNTIME_LEASE_SECONDS", 30.0, minimum=1)
# A run whose model call waits for budget headroom (money only held by calls under way) is sent
# again after this many seconds, doubling at each wait up to RUNTIME_LEASE_SECONDS.
RUNTIME_BUDGET_WAIT_SECONDS = env_float("RUNTIME_BUDGET_WAIT_SECONDS", 1.0, minimum=0.1)
# How often the beat's sweep looks for runs a worker lost (editable in the admin once seeded).
RUNTIME_SWEEP_INTERVAL = env_interval("RUNTIME_SWEEP_SECONDS", 30)
# The run task's hard time limit (Celery's prefork pool enforces it; a killed run is resumed).
RUNTIME_RUN_TIME_LIMIT = env_int("RUNTIME_RUN_TIME_LIMIT", 1800, minimum=1)
# A run started this many times without finishing (its worker crashed, was killed or hit the time
# limit each time) is failed, its tasks blocked: a poisoned run must not loop for ever, paying
# its model on every start. (A start counts once it has the lease: while the database is
# down, none does.)
RUNTIME_MAX_ATTEMPTS = env_int("RUNTIME_MAX_ATTEMPTS", 5, minimum=1)
# Managed agents answering each other's comments on one task wake each other at most this many
# times an hour: two models politely thanking each other would otherwise run forever.
RUNTIME_MAX_AGENT_COMMENT_WAKES = env_int("RUNTIME_MAX_AGENT_COMMENT_WAKES", 6, minimum=1)
# The bounds of managed agents waking one another (docs/runtime.md, "Why wake chains are bounded
# this way"): past either, the wake-up is held for a human to release, never lost. How many runs
# in a row may wake one another from one request (a human's or an outside agent's act)...
RUNTIME_MAX_CHAIN_RUNS = env_int("RUNTIME_MAX_CHAIN_RUNS", 50, minimum=1)
# ...and how many runs an agent may have in an hour before another agent's act may wake it again.
RUNTIME_MAX_AGENT_RUNS_PER_HOUR = env_int("RUNTIME_MAX_AGENT_RUNS_PER_HOUR", 120, minimum=1)

# --- api ---
# One name per "status" choice set (roster, discovery, collaboration); fields of the same name
# with different choices otherwise collide and `spectacular --fail-on-warn` fails.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {}).update(
    {
        "AgentStatusEnum": ["idle", "active", "busy", "offline"],
        "ExpertStatusEnum": ["idle", "busy"],
        "CollaborationStatusEnum": "collaboration.models.SessionStatus",
        # A task's status appears on tasks and on their subtasks: one enum for both.
        "TaskStatusEnum": "tasks.models.TaskStatus",
        "RunStatusEnum": "runtime.models.RunStatus",
        "BudgetAlertKindEnum": "costs.models.AlertKind",
        # Two fields named `kind`: a task event's (its name from before the second came) and
        # who made a change in GET /api/audit.
        "KindEnum": "tasks.models.EventKind",
        "AuditActorKindEnum": "organization.history.ActorKind",
    }
)  # fmt: skip

# Largest page of any list (`?limit=` above it is capped); pinned by issue 8.
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 200, minimum=1)
# Requests per API key (or logged-in user): "<n>/<second|minute|hour|day>", or "off".
API_THROTTLE_RATE = env_str("API_THROTTLE_RATE", "600/min")
# DRF's rate format, checked here: a typo would otherwise answer 500 on every request.
if API_THROTTLE_RATE.lower() != "off" and not re.fullmatch(
    r"[1-9]\d*/(s|sec|second|m|min|minute|h|hour|d|day)", API_THROTTLE_RATE
):
    raise ImproperlyConfigured(
        f"API_THROTTLE_RATE={API_THROTTLE_RATE!r}: use <n>/<second|minute|hour|day> "
        "(e.g. 600/min) or off."
    )
# Failed authentications (401s of /api/ and /mcp) one client address may have in a window of
# AUTH_FAILURE_WINDOW_SECONDS (opened by its first); past it the address answers 429
# `authentication_throttled` until the window ends. 0 turns it off.
AUTH_FAILURE_LIMIT = env_int("AUTH_FAILURE_LIMIT", 30, minimum=0)
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 600, minimum=1)
# How long a POST's Idempotency-Key is remembered (its first answer replayed), in seconds.
IDEMPOTENCY_KEY_WINDOW_SECONDS = env_int("IDEMPOTENCY_KEY_WINDOW_SECONDS", 86400, minimum=1)
# Request bodies above this answer 413 `too_large` under /api/ (Django's own limit, 2.5 MB).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440, minimum=1)

# The throttle counts in the cache, so it must be shared by every server process: Redis when
# REDIS_URL is set; otherwise the embedded setup runs one server process, and memory suffices.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "config.cache.SharedPoolRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "agent-org",
            # A slow or absent Redis must not hang requests (the throttle then lets them pass).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- expert discovery (issue 5) ---
# Seed 002's files: <dir>/<org slug>/experts_manifest.json and <dir>/<org slug>/status/expert{id}.
# Empty: no files are written and the on-commit manifest refresh is off.
AGENT_ORG_MANIFEST_DIR = env_str("AGENT_ORG_MANIFEST_DIR")
