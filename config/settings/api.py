"""The REST API: DRF, the OpenAPI schema, page size, throttling and request limits."""

import re

from django.core.exceptions import ImproperlyConfigured

from config.settings.environment import env_int, env_str

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
    # orjson for JSON (infrastructure/renderers.py), and DRF's browsable API.
    "DEFAULT_RENDERER_CLASSES": [
        "infrastructure.renderers.OrjsonRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's, with a short cut for */* and application/json (infrastructure/negotiation.py).
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
    # One name per "status" choice set (roster, discovery, collaboration); fields of the same name
    # with different choices otherwise collide and `spectacular --fail-on-warn` fails.
    "ENUM_NAME_OVERRIDES": {
        "AgentStatusEnum": ["idle", "active", "busy", "offline"],
        "ExpertStatusEnum": ["idle", "busy"],
        "CollaborationStatusEnum": "collaboration.models.SessionStatus",
        # A task's status appears on tasks and on their subtasks: one enum for both.
        "TaskStatusEnum": "tasks.models.TaskStatus",
        "RunStatusEnum": "runtime.models.RunStatus",
        "BudgetAlertKindEnum": "costs.models.AlertKind",
        # Two fields named `kind`: a task event's and who made a change in GET /api/audit.
        "KindEnum": "tasks.models.EventKind",
        "AuditActorKindEnum": "organization.history.ActorKind",
        # A policy's trigger, beside a run's; a task's urgency, also in a policy's urgencies.
        "ApprovalPolicyTriggerEnum": "tasks.models.PolicyTrigger",
        "RunTriggerEnum": "runtime.models.TRIGGERS",
        "UrgencyEnum": "tasks.models.Urgency",
        "DecisionKindEnum": "tasks.models.DecisionKind",
        "DecisionStatusEnum": "tasks.models.DecisionStatus",
    },
}


# Largest page of any list (`?limit=` above it is capped); pinned by issue 8.
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 200, minimum=1)
# Requests per API key (or logged-in user): "<n>/<second|minute|hour|day>", or "off".
API_THROTTLE_RATE = env_str("API_THROTTLE_RATE", "600/min")

# `/metrics` answers only `Authorization: Bearer <METRICS_TOKEN>`; unset, it is not served (404).
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
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
