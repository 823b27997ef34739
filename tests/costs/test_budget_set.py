"""Budgets against the ledger (docs/costs.md, "Budgets" and "How a call is held")."""

from decimal import Decimal

import pytest
from django.db.models import Sum

from costs.budgets import budget_set
from costs.metering import BudgetExhausted, Meter, reserve, settle
from costs.models import UsageRecord
from organization.caller import caller_for_member
from tests.costs.conftest import auth, hold
from tests.factories import make_admin_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_budget_set_while_a_held_call_is_under_way_counts_it_and_is_not_overspent(cast):
    """ "A budget created mid-month starts from what the ledger already holds for its scope and
    month", and "what is spent never exceeds a budget". `spent_so_far` (costs/budgets.py) skips
    the ledger's `reserved` rows, and `settle` books a held call only on the budgets its
    reservation locked (`ticket.budget_ids`). So a call the organization's budget held when the
    team's budget was set is counted by neither: the team budget starts at $0 and lets the team
    spend its whole limit again, past it."""
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="10")
    meter = Meter.for_agent(cast.alex, "run")
    # A $0.003 call (1,000 + 1,000 tokens of the fake model) under way, held by the org budget.
    first = reserve(meter, "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    team, _ = budget_set(caller=caller, scope="team", team="Development", limit_usd="0.004")
    settle(first, prompt_tokens=1000, completion_tokens=1000)

    # The team budget should now have $0.001 left: another $0.003 call must be refused.
    try:
        second = reserve(meter, "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    except BudgetExhausted:
        second = None
    if second is not None:
        settle(second, prompt_tokens=1000, completion_tokens=1000)
    spent = UsageRecord.objects.filter(team=cast.dev).aggregate(s=Sum("cost_usd"))["s"]
    team.refresh_from_db()
    assert spent <= Decimal("0.004"), (
        f"the team spent ${spent} of a $0.004 budget (its counter says ${team.spent_usd})"
    )


def test_a_task_budget_without_its_task_is_invalid_input_not_a_404(cast, client):
    """docs/design.md: 400 invalid input, 404 absent. A team or agent budget without its subject
    answers 400 `invalid` ("team: required …"); a task budget without `task` answers
    404 `task_not_found` "Task not found: None" (costs/budgets.py budget_set looks up `None`)."""
    for body in (
        {"scope": "task", "limit_usd": "1"},
        {"scope": "task", "task": None, "limit_usd": "1"},
    ):
        response = client.post(
            "/api/budgets", body, content_type="application/json", **auth(cast.org_key)
        )
        assert response.status_code == 400, (body, response.status_code, response.json())
        assert response.json()["code"] == "invalid"
        assert "task" in response.json()["error"]


@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "orm"])
def test_a_held_call_is_booked_once_on_a_budget_set_while_it_ran(cast, monkeypatch, one_statement):
    """Both settle paths (costs/sql.py and the ORM's) book a held call on a budget set while it
    ran, without touching that budget's holds, and the held budget as before."""
    from costs import metering
    from costs.models import Budget

    monkeypatch.setattr(metering, "ONE_STATEMENT", one_statement)
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    org, _ = budget_set(caller=caller, scope="organization", limit_usd="10")
    meter = Meter.for_agent(cast.alex, "run")
    first = reserve(meter, "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    team, _ = budget_set(caller=caller, scope="team", team="Development", limit_usd="1")
    # Another call, held by both, is under way when the first returns.
    second = reserve(meter, "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    settle(first, prompt_tokens=500, completion_tokens=500)  # $0.0015
    org.refresh_from_db()
    team.refresh_from_db()
    assert (org.spent_usd, org.reserved_usd) == (Decimal("0.0015"), Decimal("0.003"))
    assert (team.spent_usd, team.reserved_usd) == (Decimal("0.0015"), Decimal("0.003"))
    settle(second, prompt_tokens=1000, completion_tokens=1000)
    for budget in (org, team):
        budget.refresh_from_db()
        assert (budget.spent_usd, budget.reserved_usd) == (Decimal("0.0045"), 0)
    # Morgan (no team) is not covered by the team's budget: not booked on it.
    morgan = hold(cast.morgan, prompt_bound=10, max_tokens=10)
    settle(morgan, prompt_tokens=10, completion_tokens=10)
    assert Budget.objects.get(pk=team.pk).spent_usd == Decimal("0.0045")


def test_a_held_call_its_worker_never_settled_is_booked_on_a_budget_set_while_it_ran(cast):
    """The sweep books an expired hold at its worst case on a budget set while it was held too."""
    from datetime import timedelta

    from django.utils import timezone

    from costs.metering import sweep_expired

    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="10")
    hold(cast.alex, prompt_bound=1000, max_tokens=1000)
    agent, _ = budget_set(caller=caller, scope="agent", agent="agent-alex", limit_usd="1")
    other, _ = budget_set(caller=caller, scope="agent", agent="agent-sarah", limit_usd="1")
    UsageRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep_expired() == 1
    agent.refresh_from_db()
    other.refresh_from_db()
    assert (agent.spent_usd, agent.reserved_usd) == (Decimal("0.003"), 0)
    assert other.spent_usd == 0
