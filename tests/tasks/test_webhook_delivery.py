"""The delivery service, one attempt at a time (the Celery task only adds the retry policy)."""

import pytest

from tasks.models import WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.webhooks import RetryLater, webhook_deliver
from tests.factories import make_agent, make_org
from tests.tasks.test_webhooks import Receiver

pytestmark = pytest.mark.django_db


def delivery_to(url):
    org = make_org()
    alex = make_agent(org, "agent-alex", webhook_url=url)
    task_create(org=org, actor=SYSTEM, title="Index orders", assignee=alex)
    return WebhookDelivery.objects.get(agent=alex)


def test_a_failed_attempt_is_recorded_and_asks_for_a_retry(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(failures=1) as receiver:
        delivery = delivery_to(receiver.url)
        with pytest.raises(RetryLater) as raised:
            webhook_deliver(delivery_id=delivery.pk, max_retries=3)
        assert raised.value.attempts == 1
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_error) == (
            "pending",
            1,
            "HTTP 500",
        )
        webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 2, 200)


def test_the_last_allowed_attempt_fails_the_delivery_for_good(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    with Receiver(failures=100) as receiver:
        delivery = delivery_to(receiver.url)
        webhook_deliver(delivery_id=delivery.pk, max_retries=0)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 1)


def test_a_refused_address_fails_at_once_and_a_finished_delivery_is_not_sent_again(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    delivery = delivery_to("http://127.0.0.1:9/hook")
    webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", "refused address")
    webhook_deliver(delivery_id=delivery.pk, max_retries=3)
    delivery.refresh_from_db()
    assert delivery.attempts == 1
