"""The beat schedules the apps seed on migrate (organization/schedules.py)."""

from datetime import timedelta

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from organization.schedules import ensure_periodic_task

pytestmark = pytest.mark.django_db


def test_seeding_survives_two_intervals_of_the_same_length():
    """IntervalSchedule has no unique constraint: the admin's "add interval" (or two migrates at
    once) leaves two "every 60 seconds" rows, and the seeding of every later migrate (so every
    `make run` start) must not fail on them with MultipleObjectsReturned."""
    IntervalSchedule.objects.create(every=61, period=IntervalSchedule.SECONDS)
    IntervalSchedule.objects.create(every=61, period=IntervalSchedule.SECONDS)
    ensure_periodic_task(name="sweep", task="x.sweep", every=timedelta(seconds=61))
    ensure_periodic_task(name="sweep", task="x.sweep", every=timedelta(seconds=61))
    interval = PeriodicTask.objects.get(name="sweep").interval
    assert (interval.every, interval.period) == (61, "seconds")
    assert IntervalSchedule.objects.filter(every=61).count() == 2


def test_seeding_makes_the_interval_it_needs_once():
    """Two tasks of one period share one new interval row."""
    ensure_periodic_task(name="a", task="x.a", every=timedelta(seconds=47))
    ensure_periodic_task(name="b", task="x.b", every=timedelta(seconds=47))
    assert IntervalSchedule.objects.filter(every=47, period="seconds").count() == 1
