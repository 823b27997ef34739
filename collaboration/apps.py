from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def check_visibility_timeout() -> None:
    """Redis re-delivers unacked work after visibility_timeout: it must outlast a whole session."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    visibility = float(options.get("visibility_timeout", 3600))
    if visibility <= settings.COLLAB_SESSION_TIME_LIMIT:
        raise ImproperlyConfigured(
            f"CELERY_VISIBILITY_TIMEOUT ({visibility:g} s) must exceed COLLAB_SESSION_TIME_LIMIT "
            f"({settings.COLLAB_SESSION_TIME_LIMIT} s = (COLLAB_MAX_AGENTS + 3) x "
            "COLLAB_AGENT_TIMEOUT + 30 by default), or Redis re-delivers sessions that are still "
            "running. Raise it, or lower the collaboration limits."
        )


class CollaborationConfig(AppConfig):
    name = "collaboration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        check_visibility_timeout()
        from . import tools  # noqa: F401  (registers start_collaboration / get_collaboration)
