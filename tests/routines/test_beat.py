"""Routines on a real `celery beat` and a real worker (the issue's "Done when"): an interval
routine fires at its schedule; across a worker restart its `concurrency` still holds and its
`catch_up` decides what the missed occurrences become."""

import json
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from config.celery import app
from routines.apps import SWEEP_NAME, ensure_routines_sweep_schedule
from routines.models import Occurrence, Routine
from tasks.models import Task, TaskStatus
from tests.conftest import requires_postgres
from tests.tasks.test_sweep import (  # noqa: F401  (fixtures)
    beat_process,
    needs_redis,
    worker_closes_its_connections,
)

pytestmark = [
    requires_postgres(),
    needs_redis,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("worker_closes_its_connections"),
]
INTERVAL = 5
DEADLINE = 60


def ops_routine(cast, **fields) -> Routine:
    """Every 5 s, owned by Ops: the recommendation gives its Redis work to Morgan (external, so
    no managed run acts on the tasks meanwhile)."""
    made = cast.routine(team="Ops", required_expertise="Redis", interval_seconds=INTERVAL, **fields)
    return Routine.objects.get(pk=made["id"])


@contextmanager
def worker():
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


def poll(check, what: str, seconds: float = DEADLINE):
    """`check()` once it is truthy, polled until a deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {seconds} s")


def ticks_waiting() -> int:
    """The routines' ticks the beat sent that no worker took yet (on the broker's queue)."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    messages = [json.loads(m) for m in client.lrange("celery", 0, -1)]
    return sum(m["headers"].get("task") == "routines.fire" for m in messages)


@pytest.fixture
def beat(beat_process):  # noqa: F811  (the fixture imported above)
    """start() runs a real beat, the routines' sweep every second; its log's path."""

    def start():
        ensure_routines_sweep_schedule()
        every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
        PeriodicTask.objects.filter(name=SWEEP_NAME).update(interval=every_second, enabled=True)
        app.control.purge()
        return beat_process()

    return start


def history(routine: Routine, **filters) -> list[Occurrence]:
    return list(routine.occurrences.filter(**filters).order_by("at", "pk"))


def test_an_interval_routine_fires_on_the_beat_at_its_schedule(cast, beat):
    routine = ops_routine(cast, concurrency="allow")
    log = beat()
    with worker():
        created = poll(
            lambda: len(got := history(routine, outcome="created")) >= 3 and got,
            "three occurrences",
        )
    first, second, third = created[:3]
    assert all(o.task.assignee == cast.morgan for o in created), log.read_text()[-2000:]
    for earlier, later in ((first, second), (second, third)):
        assert timedelta(seconds=4) <= later.at - earlier.at <= timedelta(seconds=6.5)
    assert all(o.reason == "" for o in created)


@pytest.mark.parametrize("catch_up", ["skip", "run_once"])
def test_catch_up_decides_the_occurrences_missed_while_the_worker_was_away(cast, beat, catch_up):
    routine = ops_routine(cast, concurrency="allow", catch_up=catch_up)
    beat()
    with worker():
        poll(lambda: history(routine, outcome="created"), "first occurrence")
    stopped = timezone.now()
    poll(lambda: ticks_waiting() >= 3, "three ticks sent while the worker was away")
    restarted = timezone.now()

    with worker():
        missed = poll(
            lambda: routine.occurrences.filter(
                at__gte=restarted, reason__contains="missed"
            ).first(),
            "the missed occurrences handled",
        )
        # The schedule goes on after them.
        poll(
            lambda: history(routine, outcome="created", reason="", at__gt=missed.at),
            "an occurrence on time after the restart",
        )

    # Nothing ran for the ticks sent while the worker was away, but for the last one if it was
    # still within its grace (5 s) when the worker came back: that one is on time.
    grace = timedelta(seconds=INTERVAL)
    assert history(routine, at__gt=stopped, at__lt=restarted - grace) == []
    handled = history(routine, reason__contains="missed")
    assert handled == [missed]  # one record for all of them, not one per expired tick
    if catch_up == "skip":
        assert (missed.outcome, missed.task) == ("skipped", None)
        assert missed.reason.startswith("missed: ")
    else:
        assert missed.outcome == "created" and missed.task.assignee == cast.morgan
        assert missed.reason.startswith("catch_up run_once: ")
    # Three ticks were sent meanwhile: the last may still have been on time.
    count = int(missed.reason.split(": ")[1].split()[0])
    assert count >= 2
    assert Task.objects.count() == len(history(routine, outcome="created"))


@pytest.mark.parametrize("concurrency", ["skip", "queue"])
def test_concurrency_holds_across_a_worker_restart(cast, beat, concurrency):
    routine = ops_routine(cast, concurrency=concurrency)
    beat()
    waiting = {"skip": {"outcome": "skipped"}, "queue": {"outcome": "held"}}[concurrency]
    with worker():
        (first,) = poll(lambda: history(routine, outcome="created"), "first occurrence")
        poll(lambda: history(routine, **waiting), f"an occurrence {waiting['outcome']}")
    poll(lambda: ticks_waiting() >= 2, "two ticks sent while the worker was away")
    restarted = timezone.now()

    with worker():
        poll(lambda: history(routine, at__gte=restarted), "an occurrence after the restart")
        assert list(Task.objects.values_list("pk", flat=True)) == [first.task_id]

        Task.objects.filter(pk=first.task_id).update(status=TaskStatus.COMPLETED)
        second = poll(
            lambda: history(routine, outcome="created").__getitem__(slice(1, 2)),
            "the next task once the first finished",
        )[0]

    assert Task.objects.count() == 2
    assert second.task.assignee == cast.morgan
    if concurrency == "skip":
        busy = history(routine, outcome="skipped", reason__startswith="routine_busy")
        assert busy and all(o.at < second.at for o in busy)
    else:
        # The oldest held occurrence became the task, dated when it came due.
        assert second.reason == "held until the previous occurrence's task finished"
        assert second.at < restarted
