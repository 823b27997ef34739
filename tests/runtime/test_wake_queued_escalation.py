"""A task only queued for a managed agent (it has no room) must not wake it."""

import pytest

from runtime.models import Run
from tasks import services
from tests.factories import give_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_escalation_that_only_queues_the_task_for_a_full_senior_does_not_wake_it(cast):
    """docs/tasks.md ("Work reaching an agent"): `queued` does not wake — "the agent has no room
    yet"; docs/runtime.md: the expert a queued task only waits for is not woken, "it does not
    hold the task yet, and the queue's refill that gives it the task wakes it". An escalation to
    a senior at capacity queues the task for the senior (docs/tasks.md) — the same situation —
    yet its inbox kind is `escalated`, so the senior is woken: a run (a paid model call) about a
    task it neither holds nor can take, and a second run when the refill gives it the task."""
    give_tasks(cast.lena, 5)  # Lena, Alex's senior, is at capacity
    task = cast.assign(cast.alex, "stuck", by=cast.actor(cast.alex))
    moved = services.task_escalate(task=task, actor=cast.actor(cast.alex), reason="stuck")
    moved.refresh_from_db()
    assert (moved.status, moved.assignee_id, moved.queued_for_id) == ("queued", None, cast.lena.pk)
    assert not Run.objects.filter(agent=cast.lena).exists()


@pytest.mark.parametrize("senior_full", [True, False], ids=["senior-full", "senior-with-room"])
@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_the_stale_sweep_wakes_a_senior_only_when_it_gives_it_the_task(
    cast, senior_full, vendor, monkeypatch
):
    """The same rule on the sweep's path (tasks/sweep.py writes its escalations in bulk, in SQL
    of its own on PostgreSQL, through the ORM elsewhere: SQLite, `make run`): a stale task
    escalated to a full senior is queued for it, told, not woken; given to a senior with room,
    it wakes it."""
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    import tasks.sql
    from tasks.models import Task
    from tasks.sweep import sweep_stale_queued
    from tests.vendor import SaysItIs

    monkeypatch.setattr(tasks.sql, "connection", SaysItIs(connection, vendor))

    give_tasks(cast.alex, cast.alex.workload_capacity)  # Alex is full: the task is queued for him
    if senior_full:
        give_tasks(cast.lena, cast.lena.workload_capacity)
    task = services.task_create(org=cast.org, actor=cast.actor(cast.sarah), title="waits")
    services.task_queue(task=task, actor=cast.actor(cast.sarah), to=cast.alex)
    Task.objects.filter(pk=task.pk).update(queued_at=timezone.now() - timedelta(days=2))

    assert sweep_stale_queued().escalated == 1
    task.refresh_from_db()
    if senior_full:
        assert (task.status, task.queued_for_id) == ("queued", cast.lena.pk)
    else:
        assert (task.status, task.assignee_id) == ("assigned", cast.lena.pk)
    assert Run.objects.filter(agent=cast.lena).exists() is not senior_full
