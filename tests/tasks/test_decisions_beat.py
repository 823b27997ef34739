"""Decisions on the beat (issue 37 §2): a real `celery beat` sends the decisions sweep every
DECISIONS_SWEEP_SECONDS to a real worker, which warns the deciders and then expires the decision."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.core import mail
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from config.celery import app
from tasks.apps import DECISIONS_SWEEP_NAME, ensure_decisions_sweep_schedule
from tasks.models import DecisionStatus, HumanDecision, InboxItem, Task
from tests.conftest import requires_postgres
from tests.factories import make_admin_user
from tests.tasks.test_approval_gate import gated, held_by_sarah, policy
from tests.tasks.test_sweep import (  # noqa: F401  (fixtures)
    beat_process,
    needs_redis,
    worker_closes_its_connections,
)


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_beat_warns_the_deciders_then_expires_the_decision(
    cast,
    beat_process,  # noqa: F811  (the fixture imported above)
    worker_closes_its_connections,  # noqa: F811
):
    make_admin_user(cast.org, username="dana", email="dana@example.com")
    # The beat's first sweep comes a few seconds after it starts: the warning's window is wide.
    policy(cast, expires_after_seconds=20, warn_before_seconds=17)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    mail.outbox.clear()

    ensure_decisions_sweep_schedule()
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.filter(name=DECISIONS_SWEEP_NAME).update(
        interval=every_second, enabled=True
    )
    app.control.purge()
    log_path = beat_process()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        deadline = time.monotonic() + 60
        stored = HumanDecision.objects.get(pk=decision["id"])
        while stored.status == DecisionStatus.PENDING and time.monotonic() < deadline:
            time.sleep(0.2)
            stored.refresh_from_db()
    assert stored.status == DecisionStatus.EXPIRED, log_path.read_text()[-2000:]
    assert stored.warned_at is not None and stored.warned_at < stored.decided_at
    assert any("expires soon" in m.subject for m in mail.outbox)
    assert Task.objects.get(pk=task_id).assignee == cast.sarah
    assert InboxItem.objects.filter(agent=cast.sarah, kind="decision").exists()
