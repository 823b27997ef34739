"""The schedule: next times (cron in its timezone, intervals), and what a beat's tick means — on
time, early, or late with missed times that `catch_up` skips or runs once; the sweep finds the
times no tick came for."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from routines import schedule, services
from routines.models import Occurrence, Routine

pytestmark = pytest.mark.django_db
PARIS = ZoneInfo("Europe/Paris")


def routine_of(cast, **fields) -> Routine:
    return Routine.objects.get(pk=cast.routine(concurrency="allow", **fields)["id"])


def tick(routine: Routine, sent_at: datetime, next_run_at: datetime):
    """The beat's tick sent at `sent_at` while the routine waited for `next_run_at`."""
    Routine.objects.filter(pk=routine.pk).update(next_run_at=next_run_at)
    expires = sent_at + timedelta(seconds=routine.periodic_task.expire_seconds)
    return services.routine_tick(routine_id=routine.pk, expires=expires)


def outcomes(routine: Routine) -> list[tuple[str, str]]:
    return list(routine.occurrences.order_by("pk").values_list("outcome", "reason"))


def test_a_cron_runs_at_its_times_in_its_timezone():
    routine = Routine(cron="0 9 * * 1", timezone="Europe/Paris")
    monday = datetime(2026, 12, 7, 9, 0, tzinfo=PARIS)
    assert schedule.next_after(routine, monday - timedelta(minutes=1)) == monday
    assert schedule.next_after(routine, monday) == monday + timedelta(weeks=1)
    # 09:00 in Paris is 08:00 UTC in winter, 07:00 in summer.
    summer = schedule.next_after(routine, datetime(2026, 7, 1, tzinfo=UTC))
    assert summer.astimezone(UTC).hour == 7


def test_a_cron_counts_each_time_once_across_a_dst_change():
    # Paris skips from 02:00 to 03:00 on 29 March 2026: 01:00 UTC is one time, not two.
    routine = Routine(cron="0 * * * *", timezone="Europe/Paris")
    start = datetime(2026, 3, 28, 23, tzinfo=UTC)
    hours = [start]
    for _ in range(4):
        hours.append(schedule.next_after(routine, hours[-1]))
    assert hours == [start + timedelta(hours=n) for n in range(5)]
    end = start + timedelta(hours=3)
    assert schedule.slots_through(routine, start, end) == (4, end + timedelta(hours=1))


def test_the_grace_is_the_setting_at_most_a_period(settings):
    settings.ROUTINES_MISFIRE_GRACE = timedelta(seconds=300)
    now = timezone.now()
    assert schedule.grace(Routine(interval_seconds=5), now) == timedelta(seconds=5)
    assert schedule.grace(Routine(cron="* * * * *"), now) == timedelta(seconds=60)
    assert schedule.grace(Routine(cron="0 9 * * 1"), now) == timedelta(seconds=300)


def test_a_tick_on_time_creates_the_occurrence(cast):
    routine = routine_of(cast, interval_seconds=60)
    sent = timezone.now() - timedelta(seconds=1)
    occurrence = tick(routine, sent, next_run_at=sent - timedelta(seconds=2))
    assert occurrence.outcome == "created" and occurrence.task.assignee == cast.alex
    assert occurrence.at == sent
    routine.refresh_from_db()
    assert routine.next_run_at == sent + timedelta(seconds=60)


@pytest.mark.parametrize(
    "fields", [{"interval_seconds": 60}, {"cron": "0 * * * *"}, {"cron": "0,1 * * * *"}]
)
def test_a_tick_delivered_twice_makes_one_occurrence(cast, fields):
    # The same message taken twice (re-delivered, or by two workers) is dated the same.
    routine = routine_of(cast, **fields)
    sent = timezone.now().replace(minute=0, second=1, microsecond=0)  # a time of each
    expires = sent + timedelta(seconds=routine.periodic_task.expire_seconds)
    Routine.objects.filter(pk=routine.pk).update(next_run_at=sent - timedelta(seconds=1))
    assert services.routine_tick(routine_id=routine.pk, expires=expires).outcome == "created"
    assert services.routine_tick(routine_id=routine.pk, expires=expires) is None
    assert outcomes(routine) == [("created", "")]


def test_a_tick_before_its_time_does_nothing(cast):
    routine = routine_of(cast, interval_seconds=60)
    sent = timezone.now()
    assert tick(routine, sent, next_run_at=sent + timedelta(seconds=40)) is None
    assert not Occurrence.objects.exists()


def test_a_late_tick_with_catch_up_skip_records_the_missed_times_as_skipped(cast):
    routine = routine_of(cast, interval_seconds=60)
    sent = timezone.now()
    occurrence = tick(routine, sent, next_run_at=sent - timedelta(seconds=250))
    assert occurrence.outcome == "skipped" and occurrence.task is None
    assert outcomes(routine) == [
        (
            "skipped",
            "missed: 5 missed occurrence(s) while the beat or the worker was away (catch_up skip)",
        )
    ]
    routine.refresh_from_db()
    assert routine.next_run_at == sent + timedelta(seconds=60)


def test_a_late_tick_with_catch_up_run_once_creates_one_task(cast):
    routine = routine_of(cast, interval_seconds=60, catch_up="run_once")
    sent = timezone.now()
    occurrence = tick(routine, sent, next_run_at=sent - timedelta(seconds=250))
    assert occurrence.outcome == "created"
    assert outcomes(routine) == [("created", "catch_up run_once: 5 missed occurrence(s)")]


def test_a_cron_tick_on_time_after_missed_times_runs_and_records_them(cast, settings):
    settings.ROUTINES_MISFIRE_GRACE = timedelta(seconds=120)
    routine = routine_of(cast, cron="*/10 * * * *")
    slot = timezone.now().replace(second=0, microsecond=0)
    slot -= timedelta(minutes=slot.minute % 10)
    sent = slot + timedelta(seconds=3)
    tick(routine, sent, next_run_at=slot - timedelta(minutes=30))
    assert [o for o, _ in outcomes(routine)] == ["skipped", "created"]
    assert outcomes(routine)[0][1].startswith("missed: 3 missed occurrence(s)")
    routine.refresh_from_db()
    assert routine.next_run_at == slot + timedelta(minutes=10)


def test_the_sweep_handles_the_times_whose_ticks_never_came(cast):
    routine = routine_of(cast, interval_seconds=60, catch_up="run_once")
    now = timezone.now()
    old = now - timedelta(seconds=200)
    Routine.objects.filter(pk=routine.pk).update(next_run_at=old)
    services.routines_sweep(now=now)
    assert outcomes(routine) == [("created", "catch_up run_once: 3 missed occurrence(s)")]
    routine.refresh_from_db()
    # The beat's phase is kept: the next time is on the old grid, within its grace.
    assert routine.next_run_at == old + timedelta(seconds=180)

    services.routines_sweep(now=now)  # nothing more is missed
    assert len(outcomes(routine)) == 1


def test_a_disabled_routine_neither_ticks_nor_is_swept(cast):
    routine = routine_of(cast, interval_seconds=60, enabled=False)
    assert routine.next_run_at is None
    assert services.routine_tick(routine_id=routine.pk) is None
    services.routines_sweep(now=timezone.now() + timedelta(days=1))
    assert not Occurrence.objects.exists()


def test_enabling_again_starts_from_now(cast):
    made = cast.routine(interval_seconds=60, enabled=False)
    before = timezone.now()
    response = cast.client.patch(f"/api/routines/{made['id']}", {"enabled": True}, format="json")
    next_run = datetime.fromisoformat(response.json()["next_run_at"])
    assert before + timedelta(seconds=60) <= next_run <= timezone.now() + timedelta(seconds=60)


def test_a_routine_deleted_with_its_owner_takes_its_beat_entry_at_its_next_tick(cast):
    from django_celery_beat.models import PeriodicTask

    made = cast.routine(agent="agent-sarah")
    cast.sarah.delete()  # the cascade deletes the routine, not the beat's entry
    assert not Routine.objects.filter(pk=made["id"]).exists()
    assert services.routine_tick(routine_id=made["id"]) is None
    assert not PeriodicTask.objects.filter(name=f"Routine {made['id']}").exists()
