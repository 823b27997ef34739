"""Edges of reserve/settle: a budget set while a call is under way; a limit lowered to 0 while
a call holds a reservation."""

from decimal import Decimal

import pytest

from costs import metering
from costs.budgets import budget_set
from costs.metering import reserve, settle
from costs.models import Budget, UsageRecord
from organization.caller import caller_for_member
from tests.costs.test_metering import meter
from tests.factories import make_admin_user

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["one statement", "orm"])
def path(request, monkeypatch):
    monkeypatch.setattr(metering, "ONE_STATEMENT", request.param == "one statement")


def test_a_call_under_way_when_a_budget_is_set_is_counted_by_it(cast, path):
    """No budget when the call starts (nothing reserved, its row written at settle); the
    organization's budget is set while the model answers. The call is paid this month, in this
    organization: the budget counts it (it stayed at 0 while the ledger held $0.003)."""
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget, _ = budget_set(caller=admin, scope="organization", limit_usd="0.004")
    settle(ticket, prompt_tokens=1000, completion_tokens=1000)
    assert UsageRecord.objects.get().cost_usd == Decimal("0.003")
    budget.refresh_from_db()
    assert budget.spent_usd == Decimal("0.003")


def test_a_failed_call_settled_after_its_limit_was_lowered_to_zero(cast, path):
    """A call holds $0.003 of a $1 budget; a human lowers the limit to 0 meanwhile; the call
    fails having used no tokens (cost 0). Its settle books it (it raised the 80 % warning of 0
    of 0, dividing 0 by 0: InvalidOperation out of settle, out of providers.complete)."""
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="agent", agent="agent-alex", limit_usd="1")
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    budget_set(caller=admin, scope="agent", agent="agent-alex", limit_usd="0")
    settle(ticket, prompt_tokens=0, completion_tokens=0, error="ProviderError: timed out")
    budget = Budget.objects.get()
    assert (budget.spent_usd, budget.reserved_usd) == (0, 0)
