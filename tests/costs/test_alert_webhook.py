"""A budget alert reaches the organization's webhook: one signed delivery per alert, through
the same delivery (and retries) as the agents' webhooks; none without a webhook."""

import hashlib
import hmac
import json

import pytest

from costs.budgets import budget_set
from organization.caller import caller_for_member
from tasks.models import WebhookDelivery
from tasks.webhooks import webhook_deliver
from tests.factories import make_admin_user
from tests.tasks.test_webhooks import Receiver

from .conftest import spend

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_budget_alert_is_posted_signed_to_the_organizations_webhook(cast, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the receiver listens on 127.0.0.1
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="0.01")
    with Receiver(failures=0) as receiver:
        cast.org.webhook_url = receiver.url
        cast.org.save()
        spend(cast.alex, 1000, 1000)  # $0.003: 30 %
        assert not WebhookDelivery.objects.exists()
        spend(cast.alex, 1700, 1700)  # $0.0081: 81 %, the warning
        spend(cast.alex, 10, 10)  # still above 80 %: no second alert
        (delivery,) = WebhookDelivery.objects.all()
        assert delivery.agent is None and delivery.payload["event"] == "budget.warning"
        webhook_deliver(delivery_id=delivery.pk, max_retries=0)
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    (headers, body) = receiver.requests[0]
    expected = hmac.new(cast.org.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Agent-Org-Signature"] == f"sha256={expected}"
    payload = json.loads(body)
    assert payload["organization"] == "acme"
    assert payload["budget"]["scope"] == "organization"
    assert payload["message"].startswith("The organization budget of Acme is at 8")


def test_no_webhook_no_delivery_but_the_alert_is_kept(cast):
    from costs.metering import BudgetExhausted
    from costs.models import BudgetAlert

    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="0")
    with pytest.raises(BudgetExhausted):
        spend(cast.alex, 1000, 1000)  # refused by a $0 budget: the exhausted alert
    assert list(BudgetAlert.objects.values_list("kind", flat=True)) == ["exhausted"]
    assert not WebhookDelivery.objects.exists()


def test_the_organization_webhook_obeys_the_address_rule(cast, settings):
    from django.core.exceptions import ValidationError

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    cast.org.webhook_url = "http://169.254.169.254/latest/meta-data"
    with pytest.raises(ValidationError):
        cast.org.full_clean()


def test_a_small_budgets_refusal_and_alert_read_its_amounts_not_zero(cast):
    """A budget under a cent read "$0.00 spent of $0.00" in its alert and "($0.00)" in its
    refusal: the texts name the amounts to the ledger's precision below a dollar."""
    from costs.metering import BudgetExhausted
    from costs.models import BudgetAlert

    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="0.004")
    spend(cast.alex, 1000, 1000)  # $0.003: 75 %, no alert yet
    with pytest.raises(BudgetExhausted) as refused:
        spend(cast.alex, 1000, 1000)  # $0.003 more at worst: does not fit the $0.001 left
    assert "($0.004 a month)" in str(refused.value)
    assert "has $0.001 left; this call could cost up to $0.003 " in str(refused.value)
    spend(cast.alex, 250, 250)  # $0.00075: 93.75 % spent, the warning
    (alert,) = BudgetAlert.objects.filter(kind="warning")
    assert alert.message.endswith(": $0.00375 spent of $0.004.")


def test_dollars_read_as_people_read_them():
    from decimal import Decimal

    from costs.money import usd

    assert [usd(Decimal(v)) for v in ("1234.5", "1", "0.5", "0.0123", "0.000000001", "0")] == [
        "$1,234.50",
        "$1.00",
        "$0.50",
        "$0.0123",
        "$0.000000001",
        "$0.00",
    ]
    assert usd(None) == "—"
