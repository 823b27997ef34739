"""The beat's sweep of lost sessions (collaboration.sweep_sessions): a broker that does not
re-deliver (the embedded filesystem one) forgets a message whose worker took it and died, and a
message can be lost before any worker takes it. The sweep sends such sessions again, at most once
a lease; a live one is left alone, and what it sends resumes the session."""

from datetime import timedelta

import pytest
from django.utils import timezone

from collaboration import runner
from collaboration.apps import SESSION_SWEEP_NAME, ensure_session_sweep_schedule
from collaboration.models import CollaborationSession
from collaboration.services import session_create
from collaboration.sweep import RUN_SESSION_TASK, sweep_sessions
from collaboration.tasks import run_collaboration
from infrastructure.models import OutboxMessage
from tests.collaboration.conftest import human, specialists

pytestmark = pytest.mark.django_db

RUN_TASK = "collaboration.run_session"


@pytest.fixture
def started(acme, offline):
    return session_create(caller=human(acme), payload={"task": "t", "agents": specialists("a")})


def sent_again() -> list[str]:
    return [m.args[0] for m in OutboxMessage.objects.filter(task_name=RUN_TASK).order_by("pk")][1:]


def age(session, seconds: float, **fields) -> None:
    past = timezone.now() - timedelta(seconds=seconds)
    CollaborationSession.objects.filter(pk=session.pk).update(
        created_at=past, dispatched_at=past, **fields
    )


@pytest.mark.django_db(transaction=True)  # the run's agent threads read the session
def test_a_session_running_on_a_dead_worker_is_sent_again_once_a_lease(started, settings):
    past = timezone.now() - timedelta(seconds=settings.COLLAB_LEASE_SECONDS + 1)
    age(
        started,
        settings.COLLAB_LEASE_SECONDS + 1,
        status="running",
        lease_token="dead",
        heartbeat_at=past,
        attempts=1,
    )
    assert sweep_sessions() == [started.pk]
    assert sent_again() == [str(started.pk)]
    assert sweep_sessions() == []  # sent a moment ago: not again before a lease has passed
    assert runner.run_session(started.pk) == "claimed"  # the copy resumes it
    started.refresh_from_db()
    assert (started.status, started.attempts) == ("completed", 2), started.error


def test_a_queued_session_whose_message_was_lost_is_sent_again(started, settings):
    age(started, settings.COLLAB_LEASE_SECONDS + 1)
    assert sweep_sessions() == [started.pk]


def test_live_recent_and_finished_sessions_are_left_alone(started, settings):
    assert sweep_sessions() == []  # queued a moment ago: its message may be on its way
    age(
        started,
        settings.COLLAB_LEASE_SECONDS + 1,
        status="running",
        lease_token="alive",
        heartbeat_at=timezone.now(),
    )
    assert sweep_sessions() == []  # its worker beats
    age(started, settings.COLLAB_LEASE_SECONDS + 1, status="completed")
    assert sweep_sessions() == []
    assert sent_again() == []


def test_the_sweeps_beat_schedule_is_seeded_once(db, settings):
    from django_celery_beat.models import PeriodicTask

    ensure_session_sweep_schedule()
    ensure_session_sweep_schedule()
    task = PeriodicTask.objects.get(name=SESSION_SWEEP_NAME)
    assert task.task == "collaboration.sweep_sessions"
    assert run_collaboration.name == RUN_TASK == RUN_SESSION_TASK  # what the sweep queues
    assert task.interval.every == int(settings.COLLAB_SWEEP_INTERVAL.total_seconds())
