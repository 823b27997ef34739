"""No backlog copies: the sweep does not send again a queued run whose message waits in the broker
behind busy threads; it sends again one whose message was lost, once nothing waits there."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from infrastructure import outbox
from runtime.models import Run
from runtime.services import sweep_runs
from tests.broker_keys import delete_broker_keys

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)"),
]


def queued_a_lease_ago(cast) -> Run:
    delete_broker_keys(settings.CELERY_BROKER_URL)
    cast.assign(cast.alex)  # its message goes to Redis; no worker takes it
    long_ago = timezone.now() - timedelta(seconds=settings.RUNTIME_LEASE_SECONDS + 5)
    Run.objects.update(dispatched_at=long_ago)
    return Run.objects.get(agent=cast.alex)


def test_a_run_whose_message_waits_in_the_broker_is_not_sent_again(cast):
    queued_a_lease_ago(cast)
    assert outbox.waiting_in_broker() == 1
    for _ in range(3):  # the beat's sweeps, one a lease
        assert sweep_runs()["resent"] == []
    assert outbox.waiting_in_broker() == 1


def test_a_run_whose_message_was_lost_is_sent_again_once(cast):
    run = queued_a_lease_ago(cast)
    delete_broker_keys(settings.CELERY_BROKER_URL)  # Redis restarted: it keeps nothing on disk
    assert outbox.waiting_in_broker() == 0
    assert sweep_runs()["resent"] == [run.pk]
    assert outbox.waiting_in_broker() == 1
    assert sweep_runs()["resent"] == []  # sent again once: it waits now, and is not lost
    delete_broker_keys(settings.CELERY_BROKER_URL)
