"""The ledger and the budgets: reserve the worst case, settle the real cost, refuse what does
not fit, one alert per crossing, lost reservations booked at their worst case."""

import logging
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from costs import metering
from costs.budgets import budget_set, state_of
from costs.metering import BudgetExhausted, Meter, reserve, settle, sweep_expired
from costs.models import AlertKind, Budget, BudgetAlert, UsageRecord, UsageState
from organization.caller import caller_for_member
from tests.factories import make_admin_user

# Outside a test transaction, so that on PostgreSQL each call takes the one-statement path
# (costs/sql.py); every test runs on the ORM path too.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True, params=["one statement", "orm"])
def path(request, monkeypatch):
    monkeypatch.setattr(metering, "ONE_STATEMENT", request.param == "one statement")
    return request.param


def human(org):
    return caller_for_member(make_admin_user(org), org)


def meter(agent, **kw):
    return Meter.for_agent(agent, "run", **kw)


def test_a_call_no_budget_covers_is_written_once_after(cast, django_assert_num_queries):
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    assert ticket.record_id is None
    # Whether a budget was set while it ran (none here), and the row.
    with django_assert_num_queries(2):
        settle(ticket, prompt_tokens=1_000, completion_tokens=500)
    row = UsageRecord.objects.get()
    assert (row.agent, row.team, row.purpose) == (cast.alex, cast.dev, "run")
    assert row.cost_usd == Decimal("0.002")
    assert (row.input_usd_per_mtok, row.output_usd_per_mtok) == (Decimal(1), Decimal(2))
    assert row.price_source == "LLM_PRICES" and row.state == UsageState.RECORDED


def test_reserve_holds_the_worst_case_and_settle_books_the_real_cost(cast):
    budget, created = budget_set(
        caller=human(cast.org), scope="agent", agent="agent-alex", limit_usd="1.00"
    )
    assert created
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    budget.refresh_from_db()
    assert ticket.worst_usd == Decimal("0.003")
    assert budget.reserved_usd == Decimal("0.003") and budget.spent_usd == 0
    assert UsageRecord.objects.get().state == UsageState.RESERVED
    settle(ticket, prompt_tokens=100, completion_tokens=50)
    budget.refresh_from_db()
    assert budget.reserved_usd == 0
    assert budget.spent_usd == Decimal("0.0002")
    row = UsageRecord.objects.get()
    assert (row.state, row.cost_usd, row.budget_ids) == (
        UsageState.RECORDED,
        Decimal("0.0002"),
        [budget.pk],
    )


def test_every_covering_budget_holds_it_and_one_that_does_not_fit_refuses(cast):
    caller = human(cast.org)
    org_budget, _ = budget_set(caller=caller, scope="organization", limit_usd="10")
    team_budget, _ = budget_set(caller=caller, scope="team", team="Development", limit_usd="10")
    tight, _ = budget_set(caller=caller, scope="agent", agent="agent-alex", limit_usd="0.002")
    # Half of it spent already: a call that does not fit what is left exhausts it for the month.
    Budget.objects.filter(pk=tight.pk).update(spent_usd=Decimal("0.001"))
    other_agent, _ = budget_set(caller=caller, scope="agent", agent="agent-sarah", limit_usd="0")
    with pytest.raises(BudgetExhausted) as refused:
        reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    assert refused.value.code == "budget_exhausted" and refused.value.status == 409
    assert "agent budget of agent-alex" in refused.value.message
    assert UsageRecord.objects.count() == 0
    for budget in (org_budget, team_budget):
        budget.refresh_from_db()
        assert budget.reserved_usd == 0 and budget.spent_usd == 0
    tight.refresh_from_db()
    assert (tight.reserved_usd, tight.spent_usd) == (0, Decimal("0.001"))
    assert state_of(tight) == "exhausted"
    assert BudgetAlert.objects.filter(budget=tight, kind=AlertKind.EXHAUSTED).count() == 1
    # Morgan (no team, no budget of its own) is covered by the organization's budget only.
    ticket = reserve(meter(cast.morgan), "openai", "fake-model", prompt_bound=10, max_tokens=10)
    assert ticket.budget_ids == [org_budget.pk]
    assert other_agent.pk not in ticket.budget_ids


def test_alerts_are_raised_once_per_crossing(cast):
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="0.01")
    for _ in range(5):  # 5 × $0.0018 = $0.009: 90 % spent
        ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=600, max_tokens=600)
        settle(ticket, prompt_tokens=600, completion_tokens=600)
    budget.refresh_from_db()
    assert budget.spent_usd == Decimal("0.009")
    assert state_of(budget) == "warning"
    alerts = list(BudgetAlert.objects.values_list("kind", flat=True))
    assert alerts == [AlertKind.WARNING]
    # The next one does not fit ($0.009 + $0.0036 > $0.01): refused, one exhausted alert.
    for _ in range(3):
        with pytest.raises(BudgetExhausted):
            reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=600, max_tokens=600)
    assert sorted(BudgetAlert.objects.values_list("kind", flat=True)) == [
        AlertKind.EXHAUSTED,
        AlertKind.WARNING,
    ]
    # Raising the limit clears the refusal: it fits again.
    budget_set(caller=human(cast.org), scope="organization", limit_usd="1")
    budget.refresh_from_db()
    assert state_of(budget) == "ok"
    reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=600, max_tokens=600)


def test_a_lost_reservation_is_booked_at_its_worst_case_once(cast):
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="1")
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    assert sweep_expired() == 0  # not expired yet
    UsageRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep_expired() == 1
    budget.refresh_from_db()
    assert (budget.spent_usd, budget.reserved_usd) == (Decimal("0.003"), 0)
    assert UsageRecord.objects.get().state == UsageState.EXPIRED
    # Its worker comes back late: nothing is booked twice.
    settle(ticket, prompt_tokens=10, completion_tokens=10)
    budget.refresh_from_db()
    assert budget.spent_usd == Decimal("0.003")


def test_a_new_month_starts_a_monthly_budget_from_zero(cast):
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="0.004")
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    settle(ticket, prompt_tokens=1000, completion_tokens=1000)
    with pytest.raises(BudgetExhausted):
        reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    Budget.objects.filter(pk=budget.pk).update(period="2000-01")
    reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    budget.refresh_from_db()
    assert budget.period == metering.current_period()
    assert (budget.spent_usd, budget.reserved_usd) == (0, Decimal("0.003"))


def test_a_new_budget_starts_from_what_the_month_already_spent(cast):
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=10, max_tokens=10)
    settle(ticket, prompt_tokens=1000, completion_tokens=1000)
    budget, _ = budget_set(caller=human(cast.org), scope="team", team="Development", limit_usd="5")
    assert budget.spent_usd == Decimal("0.003")


def test_a_task_budget_covers_its_subtasks(cast):
    from tasks.models import Task

    root = Task.objects.create(organization=cast.org, title="root")
    child = Task.objects.create(organization=cast.org, title="child", parent=root)
    budget, _ = budget_set(caller=human(cast.org), scope="task", task=root.pk, limit_usd="0.001")
    from costs.metering import task_ancestry

    with pytest.raises(BudgetExhausted) as refused:
        reserve(
            meter(cast.alex, task_id=child.pk, task_tree=task_ancestry(child.pk)),
            "openai",
            "fake-model",
            prompt_bound=1000,
            max_tokens=1000,
        )
    assert refused.value.budget.pk == budget.pk  # the root's budget held its subtask's call
    assert budget.pk in [b.pk for b in Budget.objects.filter(task=root)]


def test_offline_calls_cost_nothing_and_hold_nothing(cast):
    budget, _ = budget_set(caller=human(cast.org), scope="organization", limit_usd="0")
    ticket = reserve(meter(cast.alex), "offline", "offline", prompt_bound=10**6, max_tokens=10**6)
    settle(ticket)
    row = UsageRecord.objects.get()
    assert (row.cost_usd, row.prompt_tokens, row.completion_tokens) == (0, 0, 0)
    budget.refresh_from_db()
    assert budget.spent_usd == 0


def test_an_unpriced_model_is_recorded_with_a_null_cost(
    cast, caplog, django_assert_max_num_queries
):
    caplog.set_level(logging.WARNING, logger="costs.metering")
    budget_set(caller=human(cast.org), scope="organization", limit_usd="1")
    # Nothing can be held without a price: one read (are there budgets to warn about?), no lock.
    with django_assert_max_num_queries(1) as sent:
        ticket = reserve(
            meter(cast.alex), "openai", "llama3:8b-local", prompt_bound=10, max_tokens=10
        )
    assert "FOR UPDATE" not in sent.captured_queries[0]["sql"]
    assert "no price for openai/llama3:8b-local" in caplog.text
    settle(ticket, prompt_tokens=10, completion_tokens=10)
    row = UsageRecord.objects.get()
    assert (row.cost_usd, row.price_source) == (None, "unknown")
    # The next calls of that model neither read nor warn again (a warning a call was log spam).
    caplog.clear()
    with django_assert_max_num_queries(0):
        reserve(meter(cast.alex), "openai", "llama3:8b-local", prompt_bound=10, max_tokens=10)
    assert "no price" not in caplog.text


def test_a_call_costs_two_statements_on_postgresql_and_a_bounded_few_otherwise(
    cast, path, django_assert_max_num_queries
):
    """One statement each way on the PostgreSQL path; the ORM path (other databases) locks,
    holds and writes in a handful, whatever the number of budgets."""
    budget_set(caller=human(cast.org), scope="agent", agent="agent-alex", limit_usd="1")
    budget_set(caller=human(cast.org), scope="organization", limit_usd="1")
    reserve_bound, settle_bound = (1, 1) if path == "one statement" else (7, 6)
    with django_assert_max_num_queries(reserve_bound):
        ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=10, max_tokens=10)
    with django_assert_max_num_queries(settle_bound):
        settle(ticket, prompt_tokens=5, completion_tokens=5)
    assert UsageRecord.objects.get().state == UsageState.RECORDED
