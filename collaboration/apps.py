import re

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models.signals import post_migrate

from organization.schedules import check_visibility_outlasts, periodic_seeder

SESSION_SWEEP_NAME = "Resume lost collaboration sessions"

ensure_session_sweep_schedule = periodic_seeder(
    name=SESSION_SWEEP_NAME,
    task="collaboration.sweep_sessions",
    interval_setting="COLLAB_SWEEP_INTERVAL",
)


def check_visibility_timeout() -> None:
    """Redis re-delivers unacked work after visibility_timeout: it must outlast a whole session
    (COLLAB_SESSION_TIME_LIMIT = (COLLAB_MAX_AGENTS + 3) x COLLAB_AGENT_TIMEOUT + 30 by default)."""
    check_visibility_outlasts("COLLAB_SESSION_TIME_LIMIT", "sessions")


MODEL_NAME_RE = re.compile(r"^[^\s\x00-\x1f\x7f]{1,100}$")


def check_settings() -> None:
    """COLLAB_DEFAULT_MODE, _SYNTHESIS, COLLAB_COORDINATOR_MODEL, COLLAB_MAX_STARTS_PER_HOUR: a
    value we do not know stops start-up (healthchecks' strict settings), not every session later."""
    from .models import Mode, Synthesis

    problems = []
    for name, choices in (
        ("COLLAB_DEFAULT_MODE", Mode.values),
        ("COLLAB_DEFAULT_SYNTHESIS", Synthesis.values),
    ):
        value = getattr(settings, name)
        if value not in choices:
            problems.append(f"{name}={value!r}: must be one of {', '.join(choices)}.")
    model = settings.COLLAB_COORDINATOR_MODEL
    if model and not MODEL_NAME_RE.match(model):
        problems.append(
            f"COLLAB_COORDINATOR_MODEL={model[:120]!r}: a model name of at most 100 characters, "
            "without spaces (or unset for LLM_MODEL)."
        )
    starts = settings.COLLAB_MAX_STARTS_PER_HOUR
    if not isinstance(starts, int) or isinstance(starts, bool) or starts < 1:
        problems.append(f"COLLAB_MAX_STARTS_PER_HOUR={starts!r}: must be a positive integer.")
    if problems:
        raise ImproperlyConfigured(" ".join(problems))


class CollaborationConfig(AppConfig):
    name = "collaboration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        check_visibility_timeout()
        check_settings()
        post_migrate.connect(ensure_session_sweep_schedule, sender=self)
        from organization import registry

        from . import tools  # noqa: F401  (registers start_collaboration / get_collaboration)
        from .gate import start_gate

        # A start estimated above a collaboration_cost policy waits for a human.
        registry.register_gate(start_gate)
