"""Budget alerts stay current: a raised limit re-arms the 80 % and the exhausted alert, a budget
past its limit (self-reported calls) says it is overspent, and the admin's list names each
alert's budget (a link) and shows it as it is now."""

import pytest
from django.contrib.auth import get_user_model

from costs.budgets import budget_set
from costs.metering import BudgetExhausted
from costs.models import BudgetAlert, UsageRecord
from organization.caller import caller_for_member
from tests.factories import make_admin_user

from .conftest import UNPRICED, auth, hold, post

pytestmark = pytest.mark.django_db


def report(client, key, cost: str):
    response = post(client, "/api/usage", {**UNPRICED, "cost_usd": cost}, key)
    assert response.status_code == 201, response.content


def refused_at_zero_then_raised_to_a_dollar(cast):
    """Alex's $0 budget refuses a call (the exhausted alert), then is raised to $1: the admin's
    caller and the budget."""
    human = caller_for_member(make_admin_user(cast.org), cast.org)
    budget, _ = budget_set(caller=human, scope="agent", agent="agent-alex", limit_usd="0")
    with pytest.raises(BudgetExhausted):
        hold(cast.alex, prompt_bound=10, max_tokens=10)
    budget_set(caller=human, scope="agent", agent="agent-alex", limit_usd="1")
    return human, budget


def test_a_raised_limit_rearms_the_alerts_and_an_overspent_budget_says_so(client, cast):
    human, _ = refused_at_zero_then_raised_to_a_dollar(cast)
    report(client, cast.alex_key, "0.85")  # 85 %: the warning
    report(client, cast.alex_key, "0.29")  # $1.14 of $1: exhausted again, at the new limit
    budget_set(caller=human, scope="agent", agent="agent-alex", limit_usd="2")
    report(client, cast.alex_key, "0.50")  # $1.64 of $2: 82 %, the warning again
    alerts = list(BudgetAlert.objects.order_by("pk").values_list("kind", "message"))
    assert [kind for kind, _ in alerts] == ["exhausted", "warning", "exhausted", "warning"]
    assert alerts[0][1].startswith("The agent budget of agent-alex is exhausted in ")
    assert "$0.00 spent of $0.00" in alerts[0][1]
    assert "$0.85 spent of $1.00" in alerts[1][1]
    assert alerts[2][1].startswith("The agent budget of agent-alex is overspent in ")
    assert "$1.14 spent of $1.00 ($0.14 over its limit)" in alerts[2][1]
    assert "$1.64 spent of $2.00" in alerts[3][1]


def test_the_admins_alerts_name_their_budget_and_show_it_as_it_is_now(client, cast):
    _, budget = refused_at_zero_then_raised_to_a_dollar(cast)
    report(client, cast.alex_key, "1.14")
    client.force_login(get_user_model().objects.create_superuser("root", "r@x.io", "pw"))
    page = client.get("/admin/costs/budgetalert/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'<a href="/admin/costs/budget/{budget.pk}/change/">agent budget agent-alex</a>' in html
    # The first alert said "$0.00 spent of $0.00"; beside it, the budget as it is now.
    assert "$0.00 spent of $0.00" in html
    now = [cell.split("</td>")[0] for cell in html.split('<td class="field-now">')[1:]]
    assert len(now) == 2
    assert all("$1.14 spent of $1.00 ($0.14 over its limit)" in cell for cell in now)
    assert "budget-status-overspent" in html


def test_the_api_shows_each_alerts_budget_as_it_is_now(client, cast, django_assert_max_num_queries):
    _, budget = refused_at_zero_then_raised_to_a_dollar(cast)
    report(client, cast.alex_key, "1.14")
    with django_assert_max_num_queries(6):
        response = client.get("/api/budgets/alerts", **auth(cast.org_key))
    assert response.status_code == 200
    first, second = reversed(response.json()["results"])
    assert (first["limit_usd"], second["limit_usd"]) == ("0.000000000", "1.000000000")
    assert (
        first["budget_now"]
        == second["budget_now"]
        == {
            "id": budget.pk,
            "scope": "agent",
            "subject": "agent-alex",
            "period": budget.period,
            "limit_usd": "1.000000000",
            "spent_usd": "1.140000000",
            "state": "exhausted",
            "overspent_usd": "0.140000000",
        }
    )


def test_a_zero_cost_report_on_a_zero_limit_budget_is_not_a_500(client, cast):
    """A $0 budget has no 80 %: nothing spent on it raises no warning (its message divided 0
    by 0, a 500)."""
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="agent", agent="agent-alex", limit_usd="0")
    body = {"provider": "openai", "model": "fake-model", "prompt_tokens": 0, "completion_tokens": 0}
    response = post(client, "/api/usage", body, cast.alex_key)
    assert response.status_code == 201, response.content
    assert UsageRecord.objects.count() == 1
    # Nothing was spent: no 80 % warning either.
    assert BudgetAlert.objects.filter(kind="warning").count() == 0
