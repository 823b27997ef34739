"""The apps' own settings: LLM providers and prices, costs, collaboration, tasks, managed agents
and expert discovery."""

from decimal import Decimal
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from collaboration.providers import SDK_KEYS, default_models, price_ids
from config.settings.environment import (
    env_bool,
    env_counts,
    env_float,
    env_int,
    env_interval,
    env_prices,
    env_str,
)

# --- LLM providers and costs ---
# LLM provider for agents without their own setting: offline | openai | anthropic. When unset,
# openai if OPENAI_API_KEY is set, else anthropic if ANTHROPIC_API_KEY is, else offline.
# The keys themselves are read by the SDKs from the environment only, never stored here.
LLM_PROVIDER = env_str("LLM_PROVIDER").lower()
LLM_MODEL = env_str("LLM_MODEL")
# Used when neither the agent, the session nor LLM_MODEL names a model: each provider's own, as
# its entry in the registry (collaboration/providers/__init__.py) says.
LLM_DEFAULT_MODELS = default_models()
# How costs.pricing prices each provider's calls (genai-prices' provider id, or free): read from
# the registry too, which the costs app, below collaboration, cannot import.
LLM_PRICE_IDS = price_ids()


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
# Model calls one worker process has in flight at once, and per provider (`openai=200,…`; unset:
# the same bound); past them a call waits its turn holding no database connection, and a run says
# so (`waiting_for`: model_slot). A 429 the SDK's retries did not clear waits and tries again for
# at most LLM_RATE_LIMIT_MAX_WAIT_SECONDS (within the call's deadline) before the call fails.
LLM_MAX_CALLS_IN_FLIGHT = env_int("LLM_MAX_CALLS_IN_FLIGHT", 1000, minimum=1)
LLM_MAX_CALLS_PER_PROVIDER = env_counts("LLM_MAX_CALLS_PER_PROVIDER", [str(p) for p in SDK_KEYS])
LLM_RATE_LIMIT_MAX_WAIT_SECONDS = env_float("LLM_RATE_LIMIT_MAX_WAIT_SECONDS", 300.0)
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

# --- expert discovery (issue 5) ---
# Seed 002's files: <dir>/<org slug>/experts_manifest.json and <dir>/<org slug>/status/expert{id}.
# Empty: no files are written and the on-commit manifest refresh is off.
AGENT_ORG_MANIFEST_DIR = env_str("AGENT_ORG_MANIFEST_DIR")

# --- routines: recurring work on the beat (docs/routines.md) ---
# How late a scheduled occurrence may start and still count as on time (at most one period);
# later, it is missed and the routine's catch_up decides.
ROUTINES_MISFIRE_GRACE = env_interval("ROUTINES_MISFIRE_GRACE_SECONDS", 300)
# How often the beat's sweep looks for missed and held occurrences (seeded once, then editable).
ROUTINES_SWEEP_INTERVAL = env_interval("ROUTINES_SWEEP_SECONDS", 30)
# How many occurrences a routine's history keeps: past it, the oldest go (held ones stay).
ROUTINES_OCCURRENCES_KEPT = env_int("ROUTINES_OCCURRENCES_KEPT", 1000, minimum=10)

# --- decisions: humans decide before it happens (docs/decisions.md) ---
# How often the beat's sweep warns deciders, expires decisions and supersedes moved ones.
DECISIONS_SWEEP_INTERVAL = env_interval("DECISIONS_SWEEP_SECONDS", 15)
# An agent's question to humans expires after this long (0: never); its requester is told.
DECISIONS_QUESTION_EXPIRES_SECONDS = env_int(
    "DECISIONS_QUESTION_EXPIRES_SECONDS", 7 * 86_400, minimum=0
)
# How many decisions one agent may have pending at once (each one is mail to humans): past it, a
# gated move or a question answers 409 too_many_pending_decisions.
DECISIONS_MAX_PENDING_PER_AGENT = env_int("DECISIONS_MAX_PENDING_PER_AGENT", 20, minimum=1)
# How long an e-mailed one-click link stays valid (it works once in any case: a decided decision
# takes no second verdict).
DECISIONS_LINK_MAX_AGE = env_int("DECISIONS_LINK_MAX_AGE", 7 * 86_400, minimum=60)

# --- e-mail (the deciders' notices) ---
# EMAIL_URL: smtp://user:password@host:587 (STARTTLS with smtp+tls://, TLS with smtp+ssl://) or
# console:// (the default: mails are written to the log, as `make run` shows them). Django's own
# EMAIL_BACKEND / EMAIL_HOST / EMAIL_PORT / EMAIL_HOST_USER / EMAIL_HOST_PASSWORD apply otherwise.
EMAIL_URL = env_str("EMAIL_URL")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "agent-org@localhost")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS")
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL")
if EMAIL_URL:
    _email = urlsplit(EMAIL_URL)
    if _email.scheme == "console":
        EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    elif _email.scheme in ("smtp", "smtp+tls", "smtp+ssl"):
        EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        EMAIL_HOST = _email.hostname or "localhost"
        EMAIL_PORT = _email.port or (465 if _email.scheme == "smtp+ssl" else 587)
        EMAIL_HOST_USER = unquote(_email.username or "")
        EMAIL_HOST_PASSWORD = unquote(_email.password or "")
        EMAIL_USE_TLS = _email.scheme == "smtp+tls"
        EMAIL_USE_SSL = _email.scheme == "smtp+ssl"
    else:
        raise ImproperlyConfigured(
            f"EMAIL_URL: unknown scheme {_email.scheme!r}: use smtp://, smtp+tls://, smtp+ssl:// "
            "or console://"
        )
