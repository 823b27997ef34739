"""Managers first: a run of an agent someone reports to goes to the broker with priority 0, a
report's with 6 (Redis takes 0 first), and a worker on Redis takes a message only when it has a
free slot — so a manager's run sent later overtakes reports' runs already waiting. And a wake-up
does not wait on the row of a run that is running (the run writes it at every turn)."""

import threading
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from config.celery import app
from infrastructure import outbox
from infrastructure.models import OutboxMessage
from runtime.models import RUN_AGENT_TASK, Run, RunStatus, RunTrigger
from runtime.services import MANAGER_PRIORITY, REPORT_PRIORITY, run_wake, sweep_runs
from tasks.models import Task
from tests.broker_keys import delete_broker_keys
from tests.conftest import requires_postgres
from tests.runtime.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def run_messages() -> list[tuple[int, int | None]]:
    """(run id, priority) of every run message in the outbox, oldest first."""
    messages = OutboxMessage.objects.filter(task_name=RUN_AGENT_TASK).order_by("pk")
    return [(m.args[0], m.priority) for m in messages]


def test_a_managers_run_is_sent_first_and_a_reports_after(cast):
    cast.assign(cast.lena, "plan")
    cast.assign(cast.alex, "build")
    lena_run, alex_run = Run.objects.get(agent=cast.lena), Run.objects.get(agent=cast.alex)
    assert run_messages() == [(lena_run.pk, MANAGER_PRIORITY), (alex_run.pk, REPORT_PRIORITY)]
    assert MANAGER_PRIORITY < REPORT_PRIORITY  # Redis: the lower number is taken first


def test_the_sweep_sends_a_run_again_with_its_agents_priority(cast, settings):
    cast.assign(cast.lena, "plan")
    cast.assign(cast.alex, "build")
    long_ago = timezone.now() - timedelta(seconds=settings.RUNTIME_LEASE_SECONDS + 5)
    Run.objects.update(dispatched_at=long_ago)
    OutboxMessage.objects.all().delete()
    if settings.REDIS_URL:
        delete_broker_keys(settings.CELERY_BROKER_URL)  # their messages were lost
    resent = sweep_runs()
    lena_run, alex_run = Run.objects.get(agent=cast.lena), Run.objects.get(agent=cast.alex)
    assert sorted(resent["resent"]) == sorted([lena_run.pk, alex_run.pk])
    assert sorted(run_messages()) == sorted(
        [(lena_run.pk, MANAGER_PRIORITY), (alex_run.pk, REPORT_PRIORITY)]
    )


class RowHolder:
    """Holds a lock on one run's row from another connection until `release()`."""

    def __init__(self, run_pk: int):
        self.locked, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.hold, args=(run_pk,))
        self.thread.start()
        assert self.locked.wait(10)

    def hold(self, run_pk: int) -> None:
        try:
            with transaction.atomic():
                Run.objects.filter(pk=run_pk).update(heartbeat_at=timezone.now())
                self.locked.set()
                self.done.wait(30)
        finally:
            connection.close()

    def release(self) -> None:
        self.done.set()
        self.thread.join(10)


def wake_within(ms: int, agent, task):
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{ms}ms'")
        return run_wake(agent=agent, trigger="assigned", task=task)


@requires_postgres()
@pytest.mark.postgres
def test_a_wake_up_does_not_wait_on_a_running_runs_row_but_joins_a_queued_one_under_its_lock(cast):
    cast.assign(cast.alex, "1")
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, lease_token="tok", heartbeat_at=timezone.now()
    )
    second = Task.objects.create(organization=cast.org, title="2", assignee=cast.alex)
    holder = RowHolder(run.pk)  # the run writing its row at a turn
    try:
        assert wake_within(2000, cast.alex, second) is None  # it waits for the run's end
    finally:
        holder.release()
    assert RunTrigger.objects.get(task=second).run_id is None

    Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)
    third = Task.objects.create(organization=cast.org, title="3", assignee=cast.alex)
    holder = RowHolder(run.pk)  # a claim of the queued run, not yet committed
    try:
        with pytest.raises(OperationalError, match="lock timeout"):
            wake_within(200, cast.alex, third)
    finally:
        holder.release()
    assert wake_within(2000, cast.alex, third).pk == run.pk
    assert RunTrigger.objects.get(task=third).run_id == run.pk


# A worker with one slot, busy with `hold` while a report's message and then a manager's are sent.
held, release = threading.Event(), threading.Event()
ran: list[str] = []


@app.task(name="tests.runtime.test_priority.hold", shared=False)
def hold() -> None:
    held.set()
    release.wait(30)


@app.task(name="tests.runtime.test_priority.record", shared=False)
def record(label: str) -> None:
    ran.append(label)


@pytest.mark.worker
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
def test_a_busy_worker_on_redis_takes_the_managers_message_sent_later_first():
    import redis

    assert app.conf.worker_disable_prefetch is True
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    held.clear(), release.clear(), ran.clear()
    with start_worker(
        app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING"
    ):
        with transaction.atomic():
            outbox.enqueue(hold.name)
        assert held.wait(30)
        with transaction.atomic():
            outbox.enqueue(record.name, "report", priority=REPORT_PRIORITY)
        with transaction.atomic():
            outbox.enqueue(record.name, "manager", priority=MANAGER_PRIORITY)
        release.set()
        wait_for(lambda: len(ran) == 2, timeout=30, interval=0.05)
    assert ran == ["manager", "report"]
