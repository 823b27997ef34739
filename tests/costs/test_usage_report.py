"""A self-reported call (`POST /api/usage`, `report_usage`) is an agent's word: bounded per call
(USAGE_REPORT_MAX_COST_USD), booked on the reporter's own budget whatever it leaves, and refused
where it would exhaust a budget its colleagues' work depends on. Managed runs, whose calls the
service meters itself, are not offered the tool."""

from decimal import Decimal

import pytest

from costs.budgets import blocking_budget, budget_set, state_of
from costs.models import Budget, UsageRecord
from organization.caller import caller_for_member
from tests.factories import make_admin_user

from .conftest import UNPRICED, auth

pytestmark = pytest.mark.django_db


def report(client, key, cost: str | None = None, **body):
    body = {**UNPRICED, **({"cost_usd": cost} if cost is not None else {}), **body}
    return client.post("/api/usage", body, content_type="application/json", **auth(key))


def human(org):
    return caller_for_member(make_admin_user(org), org)


def test_a_report_costing_more_than_the_cap_is_refused_and_records_nothing(client, cast, settings):
    assert settings.USAGE_REPORT_MAX_COST_USD == Decimal(100)
    refused = report(client, cast.alex_key, "100.01")
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid"
    assert "USAGE_REPORT_MAX_COST_USD" in refused.json()["error"]
    # Priced from its tokens too: 60M tokens of the fake model ($1/M in) is $60; 120M is past
    # what one call may claim (400 as well).
    priced = {"provider": "openai", "model": "fake-model", "completion_tokens": 0}
    assert report(client, cast.alex_key, prompt_tokens=60_000_000, **priced).status_code == 201
    settings.USAGE_REPORT_MAX_COST_USD = Decimal(50)
    assert report(client, cast.alex_key, prompt_tokens=60_000_000, **priced).status_code == 400
    assert report(client, cast.alex_key, "100").status_code == 400
    assert UsageRecord.objects.count() == 1


def test_a_report_that_would_exhaust_the_organization_budget_is_refused(client, cast, settings):
    """One forged report of $100 on a $500 budget held everyone back."""
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="500")
    Budget.objects.filter(pk=budget.pk).update(spent_usd=Decimal("320"))
    refused = report(client, cast.alex_key, "100")
    assert refused.status_code == 409
    body = refused.json()
    assert (body["success"], body["code"]) == (False, "report_exceeds_budget")
    assert "organization budget of Acme" in body["error"]
    assert "$80.00 left for reported calls" in body["error"]
    assert not UsageRecord.objects.exists()
    budget.refresh_from_db()
    assert budget.spent_usd == Decimal("320") and blocking_budget(cast.sarah) is None
    # What leaves room is booked.
    assert report(client, cast.alex_key, "79").status_code == 201


def test_reports_never_leave_a_shared_budget_without_room_for_metered_calls(client, cast):
    """Six requests once did: five reports of $99.99 and one of $0.04 left a $500 budget a cent,
    which no managed call's worst case fits. Reports stop at 80 %; the rest is the service's."""
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="500")
    answers = [
        report(client, cast.alex_key, cost).status_code for cost in ("99.99",) * 5 + ("0.04",)
    ]
    assert answers == [201, 201, 201, 201, 409, 201]
    budget.refresh_from_db()
    assert budget.spent_usd == Decimal("400.00")
    assert state_of(budget) == "warning" and blocking_budget(cast.sarah) is None
    assert report(client, cast.alex_key, "0.01").status_code == 409


def test_a_report_that_would_exhaust_the_team_budget_is_refused(client, cast):
    budget_set(caller=human(cast.org), scope="team", team="Development", limit_usd="3")
    refused = report(client, cast.alex_key, "5")
    assert refused.status_code == 409 and refused.json()["code"] == "report_exceeds_budget"
    assert "team budget of Development" in refused.json()["error"]
    assert blocking_budget(cast.sarah) is None


def test_a_report_is_booked_on_the_reporters_own_budget_whatever_it_leaves(client, cast):
    own, _ = budget_set(caller=human(cast.org), scope="agent", agent="agent-alex", limit_usd="1")
    org, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="50")
    assert report(client, cast.alex_key, "5").status_code == 201
    own.refresh_from_db()
    org.refresh_from_db()
    assert (own.spent_usd, state_of(own)) == (Decimal(5), "exhausted")
    assert (org.spent_usd, state_of(org)) == (Decimal(5), "ok")
    # Alex's own budget holds Alex back; Sarah goes on.
    assert blocking_budget(cast.alex) == own and blocking_budget(cast.sarah) is None
