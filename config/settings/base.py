"""Django's own settings: paths, the secret key, hosts, apps, middleware, templates, the admin
login, static files and logging."""

import logging
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.settings.environment import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parents[2]

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

    Without one only DEBUG falls back to a fixed key: a known key lets anyone forge sessions.
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
# How long a blocking A2A SendMessage waits for its task to end or need input (docs/a2a.md).
A2A_BLOCKING_TIMEOUT_SECONDS = env_int("A2A_BLOCKING_TIMEOUT_SECONDS", 30, minimum=0, maximum=600)
# A remote A2A agent (runtime a2a, docs/a2a.md#remote-a2a-agents): each call's timeout, how long
# a task sent to it is followed at most, and the most bytes one of its answers may have.
A2A_REMOTE_TIMEOUT_SECONDS = env_int("A2A_REMOTE_TIMEOUT_SECONDS", 10, minimum=1, maximum=120)
A2A_REMOTE_MAX_WAIT_SECONDS = env_int(
    "A2A_REMOTE_MAX_WAIT_SECONDS", 900, minimum=1, maximum=24 * 3600
)
A2A_REMOTE_MAX_RESPONSE_BYTES = env_int(
    "A2A_REMOTE_MAX_RESPONSE_BYTES", 1024 * 1024, minimum=1024, maximum=64 * 1024 * 1024
)
# The A2A conformance kit's agent at /a2a/_conformance/tck/, which takes no key (docs/a2a.md):
# for running the kit, never on a public server.
A2A_CONFORMANCE = env_bool("A2A_CONFORMANCE", False)
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
    "routines",
    "runtime",
    # An organization as a file (export_org, import_org, the admin's export and import).
    "portability",
    "console",
]

MIDDLEWARE = [
    # Counts requests, responses and their latency for /metrics (django-prometheus); first and,
    # with its pair below, around everything else.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
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
    # Requests by view, method and status (django-prometheus); before axes, so a lockout it
    # answers is counted too.
    "django_prometheus.middleware.PrometheusAfterMiddleware",
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

# Checked here: logging.config would stop start-up with a ValueError naming neither.
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in logging.getLevelNamesMapping():
    raise ImproperlyConfigured(
        f"LOG_LEVEL={os.environ['LOG_LEVEL']!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )
# `json`: a JSON object a line, with `trace_id` and `span_id` (infrastructure/logs.py).
LOG_FORMAT = env_str("LOG_FORMAT", "text").lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT={os.environ['LOG_FORMAT']!r}: use text or json.")
# Traces over OTLP/HTTP when set (infrastructure/tracing.py; the SDK reads its other OTEL_*
# variables); the model calls' and tool calls' contents go on the spans only when asked for.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
OTEL_CAPTURE_MESSAGE_CONTENT = env_bool("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "infrastructure.logs.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            **({"formatter": "json"} if LOG_FORMAT == "json" else {}),
        }
    },
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
