"""Alerts of a budget whose limit is 0 (spending nothing allowed)."""

import pytest

from costs.budgets import budget_set
from costs.models import BudgetAlert, UsageRecord
from organization.caller import caller_for_member
from tests.costs.conftest import auth
from tests.factories import make_admin_user

pytestmark = pytest.mark.django_db


def test_a_zero_cost_report_on_a_zero_limit_budget_is_not_a_500(client, cast):
    """A $0 budget has no 80 %: nothing spent on it raises no warning (its message divided 0
    by 0, a 500)."""
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="agent", agent="agent-alex", limit_usd="0")
    body = {"provider": "openai", "model": "fake-model", "prompt_tokens": 0, "completion_tokens": 0}
    response = client.post(
        "/api/usage", body, content_type="application/json", **auth(cast.alex_key)
    )
    assert response.status_code == 201, response.content
    assert UsageRecord.objects.count() == 1
    # Nothing was spent: no 80 % warning either.
    assert BudgetAlert.objects.filter(kind="warning").count() == 0
