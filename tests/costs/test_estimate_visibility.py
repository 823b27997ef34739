"""What an agent's estimate shows of budgets that do not cover its own calls."""

from decimal import Decimal

import pytest

from costs.budgets import budget_set
from organization.caller import caller_for_member
from tests.costs.conftest import auth, post
from tests.factories import make_admin_user

pytestmark = pytest.mark.django_db

# A session Alex (or a human) asks for with Morgan.
WITH_MORGAN = {"task": "Review the plan", "agents": [{"agent_id": "agent-morgan", "focus": "db"}]}


def test_an_agents_estimate_does_not_show_a_colleagues_agent_budget(client, cast, fake_llm):
    """GET /api/budgets shows an agent only the budgets covering its own calls (Morgan's budget
    is not Alex's to read); so does the estimate of a session naming Morgan: whether it fits,
    not what it is nor what it has left."""
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    secret, _ = budget_set(caller=admin, scope="agent", agent="agent-morgan", limit_usd="7.123456")
    listed = client.get("/api/budgets", **auth(cast.alex_key))
    assert listed.status_code == 200
    assert secret.pk not in [b["id"] for b in listed.json()]
    response = post(client, "/api/collaborations/estimate", WITH_MORGAN, cast.alex_key)
    assert response.status_code == 200, response.content
    (shown,) = response.json()["budgets"]
    assert (shown["id"], shown["remaining_usd"], shown["scope"]) == (None, None, "agent")
    assert shown["subject"] == "a budget that does not cover your own calls"
    assert shown["fits"] is True and "7.12" not in response.content.decode()
    # A human reads it whole.
    human = post(client, "/api/collaborations/estimate", WITH_MORGAN, cast.org_key)
    (whole,) = human.json()["budgets"]
    assert (whole["id"], whole["remaining_usd"]) == (secret.pk, "7.123456000")


def test_a_start_refused_by_a_colleagues_budget_does_not_tell_it(client, cast, fake_llm):
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="agent", agent="agent-morgan", limit_usd="0.000001")
    response = post(client, "/api/collaborations", WITH_MORGAN, cast.alex_key)
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "budget_exhausted"
    error = response.json()["error"]
    assert "a budget that does not cover your own calls" in error
    assert "morgan" not in error.lower() and "0.000001" not in error


@pytest.mark.django_db(transaction=True)  # the session's agents run in threads
def test_a_call_refused_mid_session_by_a_colleagues_budget_does_not_tell_it(client, cast, fake_llm):
    """A session Alex starts with Morgan fits when it starts; the admin then cuts Morgan's
    budget and Morgan's call is refused. Alex reads the session: Morgan's contribution failed
    on a budget, not which budget nor what it has left (the refusal is stored as its starter may
    read it; the budget's alert tells the humans which one)."""
    from collaboration import runner

    started = post(client, "/api/collaborations", WITH_MORGAN, cast.alex_key)
    assert started.status_code == 202, started.content
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget, _ = budget_set(caller=admin, scope="agent", agent="agent-morgan", limit_usd="0.000002")
    # Half spent: the refusal exhausts it for the month, and its alert names it.
    type(budget).objects.filter(pk=budget.pk).update(spent_usd=Decimal("0.000001"))
    runner.run_session(started.json()["id"])
    seen = client.get(f"/api/collaborations/{started.json()['id']}", **auth(cast.alex_key))
    assert seen.status_code == 200
    (contribution,) = seen.json()["contributions"]
    assert contribution["status"] == "failed"
    assert "a budget that does not cover your own calls" in contribution["error"]
    text = seen.content.decode()
    assert "0.000002" not in text and "budget of agent-morgan" not in text
    from costs.models import BudgetAlert

    assert BudgetAlert.objects.filter(budget__agent__handle="agent-morgan").exists()
