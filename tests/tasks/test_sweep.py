"""The stale-queue sweep: the service, its beat schedule, and a real worker + beat on Redis."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from organization.models import Agent, TeamRule
from tasks.apps import STALE_SWEEP_NAME, ensure_stale_sweep_schedule
from tasks.models import Task, TaskEvent, WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.sweep import SweepResult, sweep_stale_queued
from tests.conftest import requires_postgres
from tests.factories import give_tasks, make_agent, make_org

ROOT = Path(__file__).resolve().parents[2]


def queued(org, *, by=None, for_=None, urgency="normal", age=timedelta(0), deadline=None):
    task = task_create(org=org, actor=SYSTEM, title=f"{urgency} task", urgency=urgency)
    Task.objects.filter(pk=task.pk).update(
        queued_by=by, queued_for=for_, queued_at=timezone.now() - age, deadline=deadline
    )
    return task


def make_team_of(slug, **rule):
    """A worker whose senior is the boss, a full expert, and a default supervisor (the chief)."""
    org = make_org(slug)
    chief = make_agent(org, "agent-chief", hierarchy_role="supervisor")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    TeamRule.objects.create(organization=org, default_supervisor=chief, **rule)
    return org, chief, boss, worker, expert


@pytest.fixture
def team(db):
    return make_team_of("sweepers")


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
    assert sweep_stale_queued().escalated == 3
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
    assert sweep_stale_queued().escalated == 1
    assert sweep_stale_queued().escalated == 0
    assert TaskEvent.objects.filter(kind="escalated").count() == 1


def test_the_organizations_own_thresholds_apply(team):
    org, chief, boss, worker, expert = team
    TeamRule.objects.filter(organization=org).update(stale_after_normal=timedelta(minutes=1))
    task = queued(org, by=worker, for_=expert, age=timedelta(minutes=2))
    assert sweep_stale_queued().escalated == 1
    assert Task.objects.get(pk=task.pk).assignee == boss


def test_without_a_senior_the_default_supervisor_then_humans(team):
    org, chief, boss, worker, expert = team
    human_made = queued(org, age=timedelta(hours=5))
    assert sweep_stale_queued().escalated == 1
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


def test_the_sweeps_escalation_reaches_the_targets_webhook(team):
    org, chief, boss, worker, expert = team
    boss.webhook_url = "http://127.0.0.1:9/boss-hook"
    boss.save()
    task = queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    assert sweep_stale_queued().escalated == 1
    delivery = WebhookDelivery.objects.get(agent=boss)
    event = TaskEvent.objects.get(task=task, kind="escalated")
    assert (delivery.status, delivery.url, delivery.event) == ("pending", boss.webhook_url, event)
    assert delivery.payload["event"] == "task.escalated"
    assert delivery.payload["agent"] == "agent-boss" and delivery.payload["actor"] == "system"
    assert delivery.payload["task"]["id"] == task.pk
    assert delivery.payload["task"]["assignee"] == "agent-boss"
    assert delivery.payload["decision"] == "ESCALATE"
    item = boss.inbox_items.get(task=task)
    assert (item.kind, item.event) == ("escalated", event)


def varied_stale_tasks(slug):
    """Stale tasks that share agents but not urgency, deadline nor chain, with targets that
    fill up mid-batch: what a batch reuses one escalation for."""
    org = make_org(slug)
    chief = make_agent(org, "agent-chief", hierarchy_role="supervisor", workload_capacity=1)
    boss = make_agent(org, "agent-boss", workload_capacity=2)
    worker = make_agent(org, "agent-worker", senior=boss)
    loner = make_agent(org, "agent-loner")
    expert = make_agent(org, "agent-expert")
    TeamRule.objects.create(organization=org, default_supervisor=chief)
    old = timedelta(days=2)
    tasks = [
        # First, so that it is assigned: queued again past its deadline, it would stay stale.
        queued(org, by=worker, for_=expert, deadline=timezone.now() - timedelta(minutes=1)),
        *(queued(org, by=worker, for_=expert, urgency=u, age=old) for u in ("low", "critical")),
        queued(org, by=worker, for_=expert, urgency="high", age=old),
        queued(org, by=loner, for_=expert, age=old),
        queued(org, by=worker, for_=expert, age=old),
        queued(org, by=loner, for_=expert, urgency="critical", age=old),
        queued(org, age=old),
    ]
    Task.objects.filter(pk=tasks[3].pk).update(delegation_chain=["agent-loner", "agent-worker"])
    return tasks


def escalation_of(task):
    task.refresh_from_db()
    handle = lambda agent: agent.handle if agent else None  # noqa: E731
    event = TaskEvent.objects.get(task=task, kind="escalated")
    inbox = [(i.agent.handle, i.kind, i.message) for i in task.inbox_items.all()]
    return (
        task.status,
        handle(task.assignee),
        handle(task.queued_for),
        handle(task.queued_by),
        task.delegation_chain,
        event.actor_kind,
        event.actor_label,
        event.before,
        event.after,
        event.message,
        event.decision,
        event.primary_choice,
        event.reasoning,
        handle(event.recipient),
        inbox,
    )


def test_a_batch_escalates_each_task_as_if_it_was_swept_alone(db):
    alone = varied_stale_tasks("alone")
    assert sweep_stale_queued(batch_size=1).escalated == len(alone)
    batched = varied_stale_tasks("batched")
    assert sweep_stale_queued(batch_size=100).escalated == len(batched)
    expected = [escalation_of(t) for t in alone]
    assert [escalation_of(t) for t in batched] == expected
    # The tasks share agents, yet were told apart: the capacity filled up, the reasons differ.
    assert {e[0] for e in expected} == {"assigned", "queued"}
    assert len({e[12] for e in expected}) == 5


@requires_postgres()  # elsewhere the batch is written with bulk_update, in several statements
def test_the_sweep_takes_few_queries_per_task(team, django_assert_max_num_queries):
    org, chief, boss, worker, expert = team
    TeamRule.objects.filter(organization=org).update(default_supervisor=None)
    boss.workload_capacity = 1000
    boss.save()
    for _ in range(200):
        queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    # The managed runtime listens to `work_reached_agent`: the batch's escalated tasks are
    # announced without being read (tasks.wakes.announce_batch).
    with django_assert_max_num_queries(10):
        assert sweep_stale_queued(batch_size=500).escalated == 200


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


STOP_SECONDS = 10


def stop_process(process: subprocess.Popen) -> None:
    """Terminate, wait with a deadline, then kill: the process (and its group) never outlives the test."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_SECONDS), (signal.SIGKILL, STOP_SECONDS)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
    raise AssertionError(f"process {process.pid} survived SIGKILL")


BEAT_APP_NAME = "tasks-test-celery-beat"


def beat_sessions() -> list[tuple]:
    """The beat's sessions on the test database (libpq names them from PGAPPNAME)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, backend_start FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [BEAT_APP_NAME],
        )
        return cursor.fetchall()


@pytest.fixture
def beat_process(tmp_path):
    """Start `celery beat` on the test database; stopped for sure, whatever the test did."""
    log_path = tmp_path / "beat.log"
    processes = []

    def start() -> Path:
        env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL}
        env.pop("TEST_DATABASE_NAME", None)
        env["PGAPPNAME"] = BEAT_APP_NAME
        # A file, not a pipe: a full pipe would block the beat's logging, and so its shutdown.
        with open(log_path, "wb") as log:
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "config",
                        "beat",
                        "-l",
                        "info",
                        "--schedule",
                        str(tmp_path / "beat-schedule"),
                        "--pidfile",
                        "",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: SIGKILL reaches any child too
                )
            )
        return log_path

    yield start
    for process in processes:
        stop_process(process)
    # The beat's session ends with its process; wait for PostgreSQL to see it go, so the
    # test database can be dropped at teardown.
    deadline = time.monotonic() + STOP_SECONDS
    while beat_sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert beat_sessions() == [], "the stopped beat still holds the test database"


@pytest.fixture
def worker_closes_its_connections():
    """The solo worker runs tasks in its own thread: close that thread's connections after each."""
    from celery.signals import task_postrun

    def close(**kwargs):
        connections.close_all()

    task_postrun.connect(close, weak=False)
    yield
    task_postrun.disconnect(close)


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_beat_and_worker_escalate_a_stale_task_to_the_right_agent(
    beat_process, worker_closes_its_connections
):
    from celery.contrib.testing.worker import start_worker
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from config.celery import app

    second = timedelta(seconds=1)
    org, chief, boss, worker, expert = make_team_of(
        "beaten", **{f"stale_after_{u}": second for u in ("critical", "high", "normal", "low")}
    )
    task = queued(org, by=worker, for_=expert)

    ensure_stale_sweep_schedule()
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.filter(name=STALE_SWEEP_NAME).update(interval=every_second, enabled=True)

    app.control.purge()
    log_path = beat_process()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            task.refresh_from_db()
            if task.status != "queued":
                break
            time.sleep(0.2)
    # The beat's session is seen by name, so the fixture's check that it ends is a real one.
    deadline = time.monotonic() + STOP_SECONDS
    while not beat_sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert beat_sessions(), "the beat's session is not named"
    output = log_path.read_text(errors="replace")
    assert task.status == "assigned", output[-3000:]
    assert task.assignee == boss
    event = TaskEvent.objects.get(task=task, kind="escalated")
    assert event.actor_kind == "system"


def test_a_poison_row_is_skipped_and_reported_and_the_rest_of_its_batch_escalated(team, caplog):
    org, chief, boss, worker, expert = team
    # A corrupt row: its queuer's senior belongs to another organization (written behind the
    # model's validation), so the escalation rule raises for this task, and only for it.
    stranger = make_agent(make_org("elsewhere"), "agent-stranger")
    rogue = make_agent(org, "agent-rogue")
    Agent.objects.filter(pk=rogue.pk).update(senior=stranger)
    before = queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    poison = queued(org, by=rogue, for_=expert, age=timedelta(hours=5))
    after = queued(org, by=worker, for_=expert, age=timedelta(hours=5))

    result = sweep_stale_queued(batch_size=10)

    assert result == SweepResult(escalated=2, skipped=[poison.pk])
    assert Task.objects.get(pk=before.pk).assignee == boss
    assert Task.objects.get(pk=after.pk).assignee == boss
    assert Task.objects.get(pk=poison.pk).status == "queued"
    assert not TaskEvent.objects.filter(task=poison, kind="escalated").exists()
    assert f"task {poison.pk} cannot be escalated" in caplog.text
    # Every sweep reports it again, and a batch holding only the poison row ends.
    assert sweep_stale_queued(batch_size=1) == SweepResult(escalated=0, skipped=[poison.pk])


def test_the_celery_task_returns_what_it_escalated_and_skipped(team):
    from tasks.tasks import sweep_stale_tasks

    org, chief, boss, worker, expert = team
    stranger = make_agent(make_org("elsewhere"), "agent-stranger")
    rogue = make_agent(org, "agent-rogue", senior=None)
    Agent.objects.filter(pk=rogue.pk).update(senior=stranger)
    task = queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    poison = queued(org, by=rogue, for_=expert, age=timedelta(hours=5))
    assert sweep_stale_tasks() == {"escalated": 1, "skipped": [poison.pk]}
    assert Task.objects.get(pk=task.pk).assignee == boss


def test_a_past_deadline_task_queued_for_a_full_senior_is_escalated_for_its_deadline_once(db):
    """Rule 7: escalated past its deadline and queued for a full senior, the task then waits
    its urgency's threshold: the next sweeps (a minute apart) leave it where it is."""
    org, chief, boss, worker, expert = make_team_of("late-bounce")
    give_tasks(boss, 5)
    give_tasks(chief, 5)
    task = queued(org, by=worker, for_=expert, deadline=timezone.now() - timedelta(minutes=1))
    assert sweep_stale_queued().escalated == 1
    task.refresh_from_db()
    assert (task.status, task.queued_for) == ("queued", boss)
    for minutes in (1, 2, 3):
        assert sweep_stale_queued(now=timezone.now() + timedelta(minutes=minutes)).escalated == 0
    assert TaskEvent.objects.filter(task=task, kind="escalated").count() == 1
    # …and its urgency's threshold (4 h for normal) from the escalation still applies.
    assert sweep_stale_queued(now=timezone.now() + timedelta(hours=5)).escalated == 1
    task.refresh_from_db()
    assert task.queued_for == chief


def test_a_task_stale_at_each_level_goes_up_to_humans_never_back_down(db):
    """Rule 6's order, one level a stale period: the senior, then the default supervisor, then
    humans — a task stale at the default supervisor does not go back to the senior."""
    org, chief, boss, worker, expert = make_team_of("bounce")
    give_tasks(boss, 5)
    give_tasks(chief, 5)
    task = queued(org, by=worker, for_=expert, age=timedelta(hours=5))
    visited = []
    for _ in range(3):
        assert sweep_stale_queued().escalated == 1
        task.refresh_from_db()
        visited.append(task.queued_for.handle if task.queued_for else task.status)
        Task.objects.filter(pk=task.pk).update(queued_at=timezone.now() - timedelta(hours=5))
    assert visited == ["agent-boss", "agent-chief", "escalated"]
