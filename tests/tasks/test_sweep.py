"""The stale-queue sweep: the service, its beat schedule, and a real worker + beat on Redis."""

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from organization.models import TeamRule
from tasks.apps import STALE_SWEEP_NAME, ensure_stale_sweep_schedule
from tasks.models import Task, TaskEvent
from tasks.rules import SYSTEM
from tasks.services import sweep_stale_queued, task_create
from tests.conftest import requires_postgres
from tests.factories import give_tasks, make_agent, make_org

ROOT = Path(__file__).resolve().parents[2]


def queued(org, *, by=None, for_=None, urgency="normal", age=timedelta(0), deadline=None):
    task = task_create(org=org, actor=SYSTEM, title=f"{urgency} task", urgency=urgency)
    Task.objects.filter(pk=task.pk).update(
        queued_by=by, queued_for=for_, queued_at=timezone.now() - age, deadline=deadline
    )
    return task


@pytest.fixture
def team(db):
    org = make_org("sweepers")
    chief = make_agent(org, "agent-chief", hierarchy_role="supervisor")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    TeamRule.objects.create(organization=org, default_supervisor=chief)
    return org, chief, boss, worker, expert


def test_stale_tasks_go_to_the_queuers_senior_by_the_default_thresholds(team):
    org, chief, boss, worker, expert = team
    stale_critical = queued(
        org, by=worker, for_=expert, urgency="critical", age=timedelta(minutes=16)
    )
    fresh_critical = queued(
        org, by=worker, for_=expert, urgency="critical", age=timedelta(minutes=14)
    )
    stale_low = queued(org, by=worker, for_=expert, urgency="low", age=timedelta(hours=25))
    fresh_low = queued(org, by=worker, for_=expert, urgency="low", age=timedelta(hours=23))
    late = queued(org, by=worker, for_=expert, deadline=timezone.now() - timedelta(seconds=1))
    assert sweep_stale_queued() == 3
    escalated = set(TaskEvent.objects.filter(kind="escalated").values_list("task_id", flat=True))
    assert escalated == {stale_critical.pk, stale_low.pk, late.pk}
    assert Task.objects.get(pk=stale_critical.pk).assignee == boss
    event = TaskEvent.objects.get(task=late, kind="escalated")
    assert (event.actor_kind, event.actor_label, event.decision) == ("system", "system", "ESCALATE")
    assert event.reasoning == "Past its deadline while queued."
    assert event.before == {"status": "queued", "assignee": None, "queued_for": "agent-expert"}
    assert boss.inbox_items.filter(task=late).exists()
    assert {fresh_critical.pk, fresh_low.pk} <= set(
        Task.objects.filter(status="queued").values_list("pk", flat=True)
    )


def test_the_sweep_is_idempotent(team):
    org, chief, boss, worker, expert = team
    queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    assert sweep_stale_queued() == 1
    assert sweep_stale_queued() == 0
    assert TaskEvent.objects.filter(kind="escalated").count() == 1


def test_the_organizations_own_thresholds_apply(team):
    org, chief, boss, worker, expert = team
    TeamRule.objects.filter(organization=org).update(stale_after_normal=timedelta(minutes=1))
    task = queued(org, by=worker, for_=expert, age=timedelta(minutes=2))
    assert sweep_stale_queued() == 1
    assert Task.objects.get(pk=task.pk).assignee == boss


def test_without_a_senior_the_default_supervisor_then_humans(team):
    org, chief, boss, worker, expert = team
    human_made = queued(org, age=timedelta(hours=5))
    assert sweep_stale_queued() == 1
    assert Task.objects.get(pk=human_made.pk).assignee == chief
    TeamRule.objects.filter(organization=org).update(default_supervisor=None)
    orphan = queued(org, age=timedelta(hours=5))
    sweep_stale_queued()
    assert Task.objects.get(pk=orphan.pk).status == "escalated"


def test_a_full_target_gets_the_task_queued_and_it_is_not_escalated_to_the_expert_again(team):
    org, chief, boss, worker, expert = team
    give_tasks(boss, 5)
    task = queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    sweep_stale_queued()
    task.refresh_from_db()
    assert (task.status, task.queued_for) == ("queued", boss)
    assert "queued for them" in TaskEvent.objects.get(task=task, kind="escalated").message
    # Waiting for the boss too long goes one step further up: the default supervisor.
    Task.objects.filter(pk=task.pk).update(queued_at=timezone.now() - timedelta(hours=5))
    sweep_stale_queued()
    assert Task.objects.get(pk=task.pk).assignee == chief


@requires_postgres()  # elsewhere the batch is written with bulk_update, in several statements
def test_the_sweep_takes_few_queries_per_task(team, django_assert_max_num_queries):
    org, chief, boss, worker, expert = team
    TeamRule.objects.filter(organization=org).update(default_supervisor=None)
    boss.workload_capacity = 1000
    boss.save()
    for _ in range(200):
        queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    with django_assert_max_num_queries(10):
        assert sweep_stale_queued(batch_size=500) == 200


def test_the_beat_schedule_is_seeded_once(db):
    from django_celery_beat.models import PeriodicTask

    ensure_stale_sweep_schedule()
    ensure_stale_sweep_schedule()
    task = PeriodicTask.objects.get(name=STALE_SWEEP_NAME)
    assert task.task == "tasks.sweep_stale_tasks"
    assert task.interval.every == int(settings.STALE_CHECK_INTERVAL.total_seconds())


# --- a real worker and a real beat on Redis -------------------------------------------------


def database_url() -> str:
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


needs_redis = pytest.mark.skipif(
    not settings.REDIS_URL and os.environ.get("CI") != "true", reason="needs Redis (REDIS_URL)"
)


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_beat_and_worker_escalate_a_stale_task_to_the_right_agent(tmp_path):
    from celery.contrib.testing.worker import start_worker
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from config.celery import app

    org = make_org("beaten")
    chief = make_agent(org, "agent-chief", hierarchy_role="supervisor")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    second = timedelta(seconds=1)
    TeamRule.objects.create(
        organization=org, default_supervisor=chief, stale_after_critical=second,
        stale_after_high=second, stale_after_normal=second, stale_after_low=second,
    )  # fmt: skip
    task = queued(org, by=worker, for_=expert)

    ensure_stale_sweep_schedule()
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.filter(name=STALE_SWEEP_NAME).update(interval=every_second, enabled=True)

    app.control.purge()
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL}
    env.pop("TEST_DATABASE_NAME", None)
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "info",
         "--schedule", str(tmp_path / "beat-schedule"), "--pidfile", ""],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                task.refresh_from_db()
                if task.status != "queued":
                    break
                time.sleep(0.2)
    finally:
        beat.terminate()
        output = beat.communicate(timeout=20)[0].decode(errors="replace")
    assert task.status == "assigned", output[-3000:]
    assert task.assignee == boss
    event = TaskEvent.objects.get(task=task, kind="escalated")
    assert event.actor_kind == "system"
