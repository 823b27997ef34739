"""Redis (the Celery broker and the shared cache), Celery and the beat's intervals."""

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import TIME_ZONE, VAR_DIR, make_var_dir
from config.settings.environment import env_bool, env_float, env_int, env_interval, env_str

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
        # How often the worker looks for new messages (kombu's default: every second, which a
        # run woken by another's move would wait on each time).
        "polling_interval": 0.1,
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
# `celery -A config worker` with no pool or concurrency option runs one process of threads: a
# run or a session holds a thread, not a database connection, while its model thinks (the
# connection goes back to the pool around each model call), so enough threads that the model
# slots (LLM_MAX_CALLS_IN_FLIGHT), not the threads, bound how many agents think at once.
CELERY_WORKER_POOL = env_str("WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = env_int("WORKER_CONCURRENCY", 1024, minimum=1)
# A worker's thread waits this long for a pooled database connection (a request waits
# DATABASE_POOL_TIMEOUT): a burst of a thousand runs queues for the pool instead of failing.
WORKER_DATABASE_POOL_TIMEOUT = env_float("WORKER_DATABASE_POOL_TIMEOUT", 300.0, minimum=0.1)
CELERY_TASK_IGNORE_RESULT = True
# No result backend (results are ignored): one instance serves every thread of a worker, instead
# of one built per thread, each build scanning the installed packages' entry points.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

STALE_CHECK_INTERVAL = env_interval("STALE_CHECK_SECONDS", 60)
# How often the beat sends the outbox messages that could not be sent at commit (broker away):
# the longest a queued session or webhook waits once the broker is back (infrastructure/outbox.py).
OUTBOX_RELAY_INTERVAL = env_interval("OUTBOX_RELAY_SECONDS", 10)
# How long a message never tried is left to the commit hook of its transaction before the relay
# takes it (a process that died before its hook ran): shorter recovers such a message sooner,
# but a hook slower than it sends its message twice.
OUTBOX_HOOK_GRACE = env_interval("OUTBOX_HOOK_GRACE_SECONDS", 30)

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
