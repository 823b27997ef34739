"""A routine's schedule: cron (five fields, in a timezone) or an interval, its next times, and
its PeriodicTask in django-celery-beat (one per routine, kept in step by the services)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery.schedules import crontab
from django.conf import settings

from infrastructure.errors import Invalid

from .models import MIN_INTERVAL_SECONDS, Routine

FIRE_TASK = "routines.fire"
CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
# Counting missed cron times stops here: "more than" this many is said as such.
MAX_COUNTED = 1000


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"timezone: unknown time zone {name!r}.", "invalid") from None


def cron_fields(cron: str) -> dict[str, str]:
    parts = cron.split()
    if len(parts) != len(CRON_FIELDS):
        raise Invalid("cron: five fields are needed (minute hour day month weekday).", "invalid")
    return dict(zip(CRON_FIELDS, parts, strict=True))


def check(*, cron: str, timezone: str, interval_seconds: int | None) -> None:
    """Exactly one schedule, and a valid one (400 `invalid`)."""
    if bool(cron) == (interval_seconds is not None):
        raise Invalid("Give either cron (with timezone) or interval_seconds.", "invalid")
    zone(timezone)
    if interval_seconds is not None:
        if interval_seconds < MIN_INTERVAL_SECONDS:
            raise Invalid(f"interval_seconds: at least {MIN_INTERVAL_SECONDS}.", "invalid")
        return
    from django_celery_beat.models import CrontabSchedule

    fields = cron_fields(cron)
    for name, value in fields.items():
        if len(value) > CrontabSchedule._meta.get_field(name).max_length:
            raise Invalid(f"cron: its {name} field is too long for the beat.", "invalid")
    try:
        crontab(**fields).remaining_delta(datetime.now(zone(timezone)))
    except (ValueError, TypeError, IndexError) as exc:
        raise Invalid(f"cron: {exc}", "invalid") from None
    except RuntimeError:  # celery's "unable to rollover": a date that never comes (31 February)
        raise Invalid("cron: the schedule never comes.", "invalid") from None


def describe(routine: Routine) -> str:
    """The schedule in a few words, for the admin and the console."""
    if routine.interval_seconds is not None:
        return f"every {routine.interval_seconds} s"
    return f"{routine.cron} ({routine.timezone})"


def next_after(routine: Routine, moment: datetime) -> datetime:
    """The routine's first scheduled time strictly after `moment`, in UTC: a cron's wall time
    in a DST gap is then one instant, not read again as the hour after it."""
    if routine.interval_seconds is not None:
        return moment + timedelta(seconds=routine.interval_seconds)
    local = moment.astimezone(zone(routine.timezone))
    last, delta, _ = crontab(**cron_fields(routine.cron)).remaining_delta(local)
    return (last + delta).astimezone(UTC)


def period(routine: Routine, moment: datetime) -> timedelta:
    """How far apart the scheduled times around `moment` are."""
    following = next_after(routine, moment)
    return next_after(routine, following) - following


def grace(routine: Routine, moment: datetime) -> timedelta:
    """How late a tick may be and still count as on time: ROUTINES_MISFIRE_GRACE, at most a
    period (APScheduler's misfire grace time)."""
    return min(settings.ROUTINES_MISFIRE_GRACE, period(routine, moment))


def slots_through(routine: Routine, start: datetime, end: datetime) -> tuple[int, datetime]:
    """How many scheduled times from `start` (itself one) fall at or before `end`, and the first
    one after `end`."""
    if end < start:
        return 0, start
    if routine.interval_seconds is not None:
        count = math.floor((end - start).total_seconds() / routine.interval_seconds) + 1
        return count, start + timedelta(seconds=count * routine.interval_seconds)
    count, moment = 0, start
    while moment <= end:
        count += 1
        if count > MAX_COUNTED:
            return count, next_after(routine, end)
        moment = next_after(routine, moment)
    return count, moment


def tick_verdict(routine: Routine, sent_at: datetime) -> tuple[int, bool] | None:
    """What a tick the beat sent at `sent_at` means: None when it is early (no scheduled time
    has come), else (how many scheduled times were missed, whether one is on time).

    An interval's tick is on time within the grace after `next_run_at`; later, it stands for
    every time since, all missed. A cron's tick is on time when a scheduled time lies within the
    grace before it; the times before that are missed."""
    late, nxt = grace(routine, sent_at), routine.next_run_at
    if routine.interval_seconds is not None:
        if sent_at + late / 2 < nxt:
            return None
        if sent_at <= nxt + late:
            return 0, True
        return slots_through(routine, nxt, sent_at)[0], False
    came, _ = slots_through(routine, nxt, sent_at + late / 2)
    if not came:
        return None
    missed, _ = slots_through(routine, nxt, sent_at - late)
    return missed, came > missed


# --- the beat's side: one PeriodicTask per routine ---------------------------------------------


def periodic_task_name(routine: Routine) -> str:
    return f"Routine {routine.pk}"


def sync_periodic_task(routine: Routine, now: datetime, *, restart: bool) -> None:
    """Create or update the routine's PeriodicTask to fire `routines.fire` on its schedule.

    Its messages expire after the grace: a tick a stopped worker did not take in time is dropped,
    and the time it stood for is found missed. `restart` (a new or changed schedule) starts the
    beat's interval from `now`, as `next_run_at`; otherwise the beat's own `last_run_at` stays."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    interval = crontab_row = None
    if routine.interval_seconds is not None:
        same = {"every": routine.interval_seconds, "period": IntervalSchedule.SECONDS}
        interval = IntervalSchedule.objects.filter(**same).order_by("pk").first()
        interval = interval or IntervalSchedule.objects.create(**same)
    else:
        same = {**cron_fields(routine.cron), "timezone": routine.timezone}
        crontab_row = CrontabSchedule.objects.filter(**same).order_by("pk").first()
        crontab_row = crontab_row or CrontabSchedule.objects.create(**same)
    values = {
        "name": periodic_task_name(routine),
        "task": FIRE_TASK,
        "kwargs": json.dumps({"routine": routine.pk}),
        "interval": interval,
        "crontab": crontab_row,
        "enabled": routine.enabled,
        "expire_seconds": max(int(grace(routine, now).total_seconds()), 1),
        "description": f"Fires the routine {routine.title!r} (routines app; edit it there).",
    }
    task = routine.periodic_task
    if task is None:
        task = PeriodicTask.objects.create(**values, last_run_at=now)
        Routine.objects.filter(pk=routine.pk).update(periodic_task=task)
        routine.periodic_task = task
        return
    if restart:
        values["last_run_at"] = now
    for name, value in values.items():
        setattr(task, name, value)
    # Only these: the beat writes `last_run_at` and its counts to the same row.
    task.save(update_fields=[*values, "date_changed"])


def delete_periodic_task(routine: Routine) -> None:
    if routine.periodic_task_id is not None:
        routine.periodic_task.delete()


def delete_orphan_periodic_task(routine_id: int) -> None:
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.filter(name=f"Routine {routine_id}", task=FIRE_TASK).delete()
