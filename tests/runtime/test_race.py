"""One run per agent at a time, held by the database (issue 11 §2): racing triggers, and a
trigger racing the run's end, never start two runs and never lose a trigger. PostgreSQL: each
thread has its own connection."""

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from runtime.models import Run, RunStatus, RunTrigger
from runtime.services import run_finish, run_wake
from tasks.rules import SYSTEM
from tasks.services import task_create
from tests.concurrency import run_at_once
from tests.conftest import requires_postgres

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 20


def external_tasks(cast, n):
    """Tasks that woke nobody (held by an external agent), to name in triggers."""
    return [task_create(org=cast.org, actor=SYSTEM, title=f"t{i}") for i in range(n)]


def test_the_database_refuses_a_second_active_run_for_an_agent(cast):
    Run.objects.create(organization=cast.org, agent=cast.alex, trigger="created")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            organization=cast.org, agent=cast.alex, trigger="comment", status=RunStatus.RUNNING
        )
    # A finished run is no obstacle.
    Run.objects.filter(agent=cast.alex).update(status=RunStatus.COMPLETED)
    Run.objects.create(organization=cast.org, agent=cast.alex, trigger="comment")


def test_twenty_racing_triggers_start_one_run_and_lose_none(cast):
    tasks = external_tasks(cast, THREADS)
    results = run_at_once(
        [lambda t=t: run_wake(agent=cast.alex, trigger="comment", task=t) for t in tasks]
    )
    (run,) = Run.objects.filter(agent=cast.alex)
    assert run.status == RunStatus.QUEUED
    assert {r.pk for r in results if r is not None} == {run.pk}
    assert sorted(run.triggers.values_list("task_id", flat=True)) == sorted(t.pk for t in tasks)
    assert not RunTrigger.objects.filter(run__isnull=True).exists()


def test_triggers_racing_the_runs_end_make_exactly_one_follow_up(cast):
    tasks = external_tasks(cast, THREADS)
    run = run_wake(agent=cast.alex, trigger="created", task=tasks[0])
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, lease_token="tok", heartbeat_at=timezone.now()
    )
    jobs = [lambda t=t: run_wake(agent=cast.alex, trigger="comment", task=t) for t in tasks[1:]]
    jobs.insert(THREADS // 2, lambda: run_finish(run=run, token="tok", status="completed"))
    run_at_once(jobs)
    runs = list(Run.objects.filter(agent=cast.alex).order_by("pk"))
    assert [r.status for r in runs] == ["completed", "queued"]
    follow_up = runs[1]
    # It follows the first run when triggers waited for its end (else the first trigger after
    # the end started it).
    assert follow_up.previous_id in (run.pk, None)
    # Every trigger reached exactly one run: the first, or the one follow-up.
    woken = RunTrigger.objects.filter(agent=cast.alex)
    assert woken.count() == THREADS
    assert not woken.filter(run__isnull=True).exists()
    assert set(woken.values_list("run_id", flat=True)) <= {run.pk, follow_up.pk}
    assert woken.filter(run=follow_up).exists()
