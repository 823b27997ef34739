"""Beat schedules the apps seed on migrate (django-celery-beat's database scheduler)."""

from datetime import timedelta


def ensure_periodic_task(*, name: str, task: str, every: timedelta, using: str = "default") -> None:
    """Seed one periodic task once; later edits in the admin are kept (get_or_create, not update)."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    # IntervalSchedule has no unique constraint: the admin's "add interval" (or two migrates at
    # once) can leave two rows of one length, where get_or_create fails on every later migrate.
    # Any of them will do.
    schedules = IntervalSchedule.objects.using(using)
    same = {"every": max(int(every.total_seconds()), 1), "period": IntervalSchedule.SECONDS}
    interval = schedules.filter(**same).order_by("pk").first() or schedules.create(**same)
    PeriodicTask.objects.using(using).get_or_create(
        name=name, defaults={"task": task, "interval": interval}
    )


def periodic_seeder(*, name: str, task: str, interval_setting: str):
    """A post_migrate receiver that seeds the periodic task `name` running `task` every
    `settings.<interval_setting>` (a timedelta), once: each app's one line for its beat job."""

    def seed(**kwargs) -> None:
        from django.conf import settings

        ensure_periodic_task(
            name=name,
            task=task,
            every=getattr(settings, interval_setting),
            using=kwargs.get("using", "default"),
        )

    seed.__doc__ = f"Seed the beat schedule {name!r} once (organization.schedules)."
    return seed


# kombu's transports that re-deliver unacked work after `visibility_timeout` (the scheme before
# "://", lowercased, without a "+…" suffix as in "redis+socket"): Redis however reached, and SQS.
REDELIVERING_TRANSPORTS = frozenset({"redis", "rediss", "sentinel", "sqs"})


def redelivers_after_visibility_timeout(broker_url: str) -> bool:
    scheme = broker_url.split("://", 1)[0] if "://" in broker_url else ""
    return scheme.split("+", 1)[0].lower() in REDELIVERING_TRANSPORTS


def check_visibility_outlasts(limit_setting: str, what: str) -> None:
    """Redis (and SQS) re-deliver unacked work after their visibility timeout: it must outlast
    `settings.<limit_setting>` (seconds), the longest `what` may run, or work still running is
    delivered again. Checked at start-up (ImproperlyConfigured); other brokers have no such limit."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if not redelivers_after_visibility_timeout(settings.CELERY_BROKER_URL):
        return
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    visibility = float(options.get("visibility_timeout", 3600))
    limit = getattr(settings, limit_setting)
    if visibility <= limit:
        raise ImproperlyConfigured(
            f"CELERY_VISIBILITY_TIMEOUT ({visibility:g} s) must exceed {limit_setting} "
            f"({limit} s), or the broker re-delivers {what} that are still running. Raise it, or "
            "lower the limit."
        )
