"""What nobody can push past the ledger's columns: a self-reported cost is bounded, the totals
render whatever the database sums, a budget's counters saturate instead of overflowing, token
counts are bounded, and the admin's report answers bad parameters with a message."""

from decimal import Decimal

import pytest

from costs import metering
from costs.budgets import budget_set, state_of
from costs.metering import Meter, settle
from costs.models import MONEY_MAX, Budget, UsageRecord
from costs.reports import book_reported
from infrastructure.errors import Invalid
from organization.caller import caller_for_agent, caller_for_member
from organization.registry import call_tool
from tests.factories import make_admin_user

from .conftest import UNPRICED, auth, hold, post

pytestmark = pytest.mark.django_db

HUGE = {**UNPRICED, "cost_usd": "9999999999"}


def human(org):
    return caller_for_member(make_admin_user(org), org)


def unpriced_row(org, agent, cost: str) -> UsageRecord:
    """A self-reported row as one written before the bound existed (straight into the ledger)."""
    return UsageRecord.objects.create(
        organization=org,
        agent=agent,
        team=agent.team,
        purpose="reported",
        provider="acme",
        model="no-such-model",
        prompt_tokens=1,
        completion_tokens=1,
        cost_usd=Decimal(cost),
        price_source="reported",
        self_reported=True,
    )


def test_a_self_reported_cost_above_the_bound_is_refused(client, cast, settings):
    settings.USAGE_REPORT_MAX_COST_USD = Decimal(1000)  # the operator's cap, at its most
    response = post(client, "/api/usage", HUGE, cast.alex_key)
    assert response.status_code == 400
    data = response.json()
    assert data["success"] is False and data["code"] == "invalid"
    assert data["error"].startswith("cost_usd: ") and "1000" in data["error"]
    assert UsageRecord.objects.count() == 0
    at_the_bound = post(client, "/api/usage", {**HUGE, "cost_usd": "1000"}, cast.alex_key)
    assert at_the_bound.status_code == 201
    assert Decimal(at_the_bound.json()["cost_usd"]) == Decimal(1000)


def test_the_report_usage_tool_has_the_same_bound(cast):
    with pytest.raises(Invalid) as refused:
        call_tool(caller_for_agent(cast.alex), "report_usage", HUGE)
    assert refused.value.status == 400 and refused.value.code == "invalid"
    assert "cost_usd" in refused.value.message and "1000" in refused.value.message
    assert UsageRecord.objects.count() == 0


@pytest.mark.parametrize("group_by", ["agent", "team", "model", "day", "purpose"])
def test_the_totals_render_whatever_the_ledger_sums(client, cast, group_by):
    for _ in range(2):
        unpriced_row(cast.org, cast.alex, "9999999999.999999999")
    for key in (cast.org_key, cast.alex_key):
        response = client.get(f"/api/costs?group_by={group_by}", **auth(key))
        assert response.status_code == 200
        assert [row["cost_usd"] for row in response.json()] == ["19999999999.999999998"]


def test_reports_past_a_budget_saturate_its_counter_instead_of_overflowing(client, cast, settings):
    settings.USAGE_REPORT_MAX_COST_USD = Decimal(1000)
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="9999999999")
    meter = Meter.for_agent(cast.alex, "reported")
    for _ in range(2):
        book_reported(
            meter,
            "acme",
            "no-such-model",
            prompt_tokens=1,
            completion_tokens=1,
            cost_usd=Decimal("9999999999"),
        )
    response = post(client, "/api/usage", {**HUGE, "cost_usd": "1000"}, cast.alex_key)
    assert response.status_code == 201
    budget.refresh_from_db()
    assert budget.spent_usd == MONEY_MAX and state_of(budget) == "exhausted"
    # The ledger keeps every report exactly; only the budget's counter stops at its column.
    assert UsageRecord.objects.count() == 3
    shown = client.get("/api/budgets", **auth(cast.org_key))
    assert shown.status_code == 200
    assert shown.json()[0]["spent_usd"] == "9999999999.999999999"
    assert shown.json()[0]["remaining_usd"] == "0.000000000"


def test_a_new_budget_over_a_ledger_past_its_column_starts_exhausted(client, cast):
    for _ in range(2):
        unpriced_row(cast.org, cast.alex, "9999999999")
    body = {"scope": "agent", "agent": "agent-alex", "monthly_limit_usd": "100"}
    response = post(client, "/api/budgets", body, cast.org_key)
    assert response.status_code == 201
    assert response.json()["spent_usd"] == "9999999999.999999999"
    assert response.json()["state"] == "exhausted"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "orm"])
def test_a_settled_call_saturates_a_nearly_full_budget(cast, monkeypatch, one_statement):
    monkeypatch.setattr(metering, "ONE_STATEMENT", one_statement)
    budget, _ = budget_set(
        caller=human(cast.org), scope="agent", agent="agent-alex", limit_usd="9999999999.99"
    )
    Budget.objects.filter(pk=budget.pk).update(spent_usd=Decimal("9999999998.99"))
    ticket = hold(cast.alex, prompt_bound=1000, max_tokens=1000)
    assert ticket.record_id is not None
    # The provider says it used far more than the call could: the real cost is booked.
    settle(ticket, prompt_tokens=100_000_000, completion_tokens=100_000_000)
    budget.refresh_from_db()
    assert (budget.spent_usd, budget.reserved_usd) == (MONEY_MAX, 0)
    assert UsageRecord.objects.get().cost_usd == Decimal(300)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "orm"])
@pytest.mark.parametrize("budgeted", [True, False], ids=["budgeted", "no budget"])
def test_a_provider_claiming_more_tokens_than_an_integer_holds_is_bounded(
    cast, monkeypatch, one_statement, budgeted
):
    monkeypatch.setattr(metering, "ONE_STATEMENT", one_statement)
    if budgeted:
        budget_set(caller=human(cast.org), scope="organization", limit_usd="10")
    ticket = hold(cast.alex, prompt_bound=1000, max_tokens=1000)
    settle(ticket, prompt_tokens=2**31, completion_tokens=2**40)
    row = UsageRecord.objects.get()
    assert (row.prompt_tokens, row.completion_tokens) == (100_000_000, 100_000_000)
    assert row.cost_usd == Decimal(300)


def test_a_priced_cost_beyond_the_column_is_booked_at_the_columns_maximum(cast, settings):
    settings.LLM_PRICES = {"openai/gold": {"input": Decimal("1e9"), "output": Decimal("1e9")}}
    ticket = hold(cast.alex, prompt_bound=1, max_tokens=1, model="gold")
    settle(ticket, prompt_tokens=100_000_000, completion_tokens=0)
    assert UsageRecord.objects.get().cost_usd == MONEY_MAX


# --- the admin's report -------------------------------------------------------------------


@pytest.fixture
def staff(client, cast):
    client.force_login(make_admin_user(cast.org))
    return client


REPORT = "/admin/costs/usagerecord/report/"


@pytest.mark.parametrize(
    "query, ignored",
    [
        ("since=2020-13-45", "since"),
        ("until=2024-02-30", "until"),
        ("since=yesterday", "since"),
        ("organization=%C2%B2", "organization"),
        ("organization=99999999999999999999999", "organization"),
    ],
)
def test_the_cost_report_ignores_a_bad_parameter_and_says_so(staff, cast, query, ignored):
    unpriced_row(cast.org, cast.alex, "2.5")
    response = staff.get(f"{REPORT}?{query}")
    assert response.status_code == 200
    said = [str(m) for m in response.context["messages"]]
    assert len(said) == 1 and said[0].startswith(f"Ignored {ignored}")
    # The rest of the report is the default one: the last 30 days of the staff's organization.
    assert response.context["organization"] == cast.org
    assert response.context["calls"] == 1


def test_the_cost_report_runs_to_the_calendars_last_day(staff, cast):
    unpriced_row(cast.org, cast.alex, "2.5")
    response = staff.get(f"{REPORT}?until=9999-12-31")
    assert response.status_code == 200
    assert not list(response.context["messages"])
    assert response.context["calls"] == 1
