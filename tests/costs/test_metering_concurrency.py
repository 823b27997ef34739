"""Calls at the moment a budget runs out: the settle of the last call that fitted raises the
budget's exhausted alert while the calls refused at the same moment raise the same alert. Both
must take the budget's row lock before the alert's unique key, or they deadlock (PostgreSQL)."""

from collections import Counter
from decimal import Decimal

import pytest
from django.db import OperationalError
from django.db.models import Sum

from costs import metering
from costs.budgets import budget_set
from costs.metering import BudgetExhausted, Meter, reserve, settle
from costs.models import AlertKind, Budget, BudgetAlert, UsageRecord, UsageState
from organization.caller import caller_for_member
from tests.concurrency import run_at_once
from tests.conftest import requires_postgres
from tests.factories import make_admin_user, make_agent

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# Each round is a race that a deadlock loses only sometimes: enough of them that the old lock
# order (alert, then budget row, on the settle) fails this test every time it runs.
ROUNDS = 20
CALLERS = 12
# The fake model's price: 1,000 + 1,000 tokens = $0.003, so the budget fits exactly one call.
ONE_CALL = Decimal("0.003")


def attempt(agent) -> str:
    try:
        ticket = reserve(
            Meter.for_agent(agent, "run"),
            "openai",
            "fake-model",
            prompt_bound=1000,
            max_tokens=1000,
        )
    except BudgetExhausted:
        return "refused"
    except OperationalError as exc:
        return f"reserve: {str(exc).splitlines()[0]}"
    try:
        settle(ticket, prompt_tokens=1000, completion_tokens=1000)  # the model answered
    except OperationalError as exc:
        return f"settle (reply lost): {str(exc).splitlines()[0]}"
    return "ok"


@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "orm"])
def test_calls_at_the_moment_a_budget_runs_out_never_deadlock(cast, monkeypatch, one_statement):
    monkeypatch.setattr(metering, "ONE_STATEMENT", one_statement)
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    outcomes = Counter()
    for n in range(ROUNDS):
        agent = make_agent(cast.org, f"agent-r{n}")
        budget_set(caller=caller, scope="agent", agent=agent.handle, limit_usd=ONE_CALL)
        outcomes.update(run_at_once([lambda agent=agent: attempt(agent)] * CALLERS))
    assert set(outcomes) <= {"ok", "refused"}, dict(outcomes)
    assert outcomes["ok"] == ROUNDS, dict(outcomes)  # one call fitted each budget
    assert not UsageRecord.objects.filter(state=UsageState.RESERVED).exists()
    for budget in Budget.objects.filter(scope="agent", agent__handle__startswith="agent-r"):
        booked = UsageRecord.objects.filter(agent_id=budget.agent_id).aggregate(s=Sum("cost_usd"))
        seen = f"{budget.subject}: {budget.spent_usd} spent, {budget.reserved_usd} held"
        assert budget.spent_usd == booked["s"] == ONE_CALL, seen
        assert budget.reserved_usd == 0, seen
        alerts = BudgetAlert.objects.filter(budget=budget, kind=AlertKind.EXHAUSTED).count()
        assert alerts == 1, seen
