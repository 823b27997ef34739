"""costs.holds: who a budget holds back, read for many agents at once (the recommendation) and as
SQL (the console's count), agreeing with `blocking_budget`; and the recommendation saying so."""

from decimal import Decimal

import pytest

from costs.budgets import blocking_budget
from costs.holds import held_agents_condition, holding_budgets
from costs.metering import current_period
from costs.models import Budget
from tasks.models import Task, TaskStatus
from tests.factories import make_agent, make_team
from tests.tasks.conftest import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def cast(db):
    return Cast()


def managed(*agents):
    for agent in agents:
        agent.runtime = "managed"
        agent.save(update_fields=["runtime"])
    return agents


def budget(cast, scope, limit, spent=None, period=None, **subject):
    return Budget.objects.create(
        organization=cast.org,
        scope=scope,
        limit_usd=Decimal(limit),
        spent_usd=Decimal(spent if spent is not None else limit),
        period=period or current_period(),
        **subject,
    )


def held_by_sql(agents) -> set[int]:
    """The agents the console's SQL finds held: through a task each holds."""
    tasks = [
        Task.objects.create(
            organization=a.organization, title=a.handle, assignee=a, status=TaskStatus.ASSIGNED
        )
        for a in agents
    ]
    found = Task.objects.filter(pk__in=[t.pk for t in tasks]).filter(
        held_agents_condition("assignee")
    )
    return set(found.values_list("assignee_id", flat=True))


def test_the_three_readings_agree_on_who_a_budget_holds_back(cast):
    ops = make_team(cast.org, "Ops")
    riley = make_agent(cast.org, "agent-riley", team=ops)
    quinn = make_agent(cast.org, "agent-quinn", team=ops)
    everyone = [cast.boss, cast.sarah, cast.alex, cast.morgan, riley, quinn]
    managed(*everyone)
    budget(cast, "agent", "1", agent=cast.alex)  # spent this month: held
    budget(cast, "agent", "1", spent="0.5", agent=cast.morgan)  # room left
    budget(cast, "team", "2", team=ops)  # the whole team held
    # Spent in an earlier month, a $0 limit holds now (nothing may be spent); $3 does not.
    budget(cast, "agent", "0", period="2000-01", agent=cast.sarah)
    budget(cast, "agent", "3", period="2000-01", agent=cast.boss)
    expected = {a.pk for a in everyone if blocking_budget(a) is not None}
    assert expected == {cast.alex.pk, cast.sarah.pk, riley.pk, quinn.pk}
    assert set(holding_budgets(everyone)) == expected
    assert held_by_sql(everyone) == expected


def test_a_refused_call_this_month_holds_and_an_external_agent_is_never_held(cast):
    managed(cast.alex)
    Budget.objects.create(
        organization=cast.org,
        scope="organization",
        limit_usd=10,
        spent_usd=1,
        period=current_period(),
        refused_period=current_period(),
    )
    assert blocking_budget(cast.alex) is not None
    assert set(holding_budgets([cast.alex, cast.sarah])) == {cast.alex.pk}
    assert held_by_sql([cast.alex, cast.sarah]) == {cast.alex.pk}


# --- the recommendation -------------------------------------------------------------------


def recommendation(cast, asker, expertise):
    response = cast.client(asker).get(f"/api/delegation/recommendation?expertise={expertise}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_recommendation_passes_over_an_agent_held_for_budget_and_says_so(cast):
    # Alex (PostgreSQL, Sarah's team) would be priority 1; its budget is spent.
    managed(cast.alex)
    budget(cast, "agent", "1", agent=cast.alex)
    body = recommendation(cast, cast.sarah, "PostgreSQL")
    assert body["decision"] == "DELEGATE"
    assert body["primary_choice"]["id"] == "agent-morgan"
    alex = next(c for c in body["candidates"] if c["id"] == "agent-alex")
    assert alex["held_for_budget"] == (
        "the agent budget “agent-alex” has no room this month: $1.00 spent of $1.00"
    )
    assert [c["id"] for c in body["candidates"]] == ["agent-morgan", "agent-alex", "agent-boss"]
    assert (
        "Alex is held for budget (the agent budget “agent-alex” has no room" in (body["reasoning"])
    )
    assert "passed over" in body["decision_text"]


def test_the_recommendation_sends_work_to_a_held_agent_only_saying_it_waits(cast):
    managed(cast.alex)
    budget(cast, "agent", "1", agent=cast.alex)
    cast.morgan.is_paused = True
    cast.morgan.save(update_fields=["is_paused"])
    body = recommendation(cast, cast.sarah, "PostgreSQL")
    assert (body["decision"], body["primary_choice"]["id"]) == ("DELEGATE", "agent-alex")
    assert body["reasoning"].endswith(
        "Alex is held for budget (the agent budget “agent-alex” has no room this month: $1.00 "
        "spent of $1.00): the work waits until the budget has room."
    )
    assert "held for budget" in body["decision_text"].split("Reasoning:")[1]


def test_nobody_is_held_without_a_budget_and_the_candidates_say_so(cast):
    managed(cast.alex)
    body = recommendation(cast, cast.sarah, "PostgreSQL")
    assert body["primary_choice"]["id"] == "agent-alex"
    assert all(c["held_for_budget"] is None for c in body["candidates"])
    assert "held for budget" not in body["decision_text"]


# --- the routing moves ----------------------------------------------------------------------


def test_a_delegation_to_an_agent_held_for_budget_says_so_in_its_event(cast):
    from tests.tasks.conftest import create, post

    managed(cast.alex)
    budget(cast, "agent", "1", agent=cast.alex)
    task = create(cast.client(cast.sarah), title="Index", agent_id="agent-sarah").json()["id"]
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task}/delegate", {"agent_id": "agent-alex"}
    )
    assert response.status_code == 200, response.content
    event = Task.objects.get(pk=task).events.get(kind="delegated")
    assert event.message == (
        "agent-sarah delegated the task to agent-alex. agent-alex is held for budget (the agent "
        "budget “agent-alex” has no room this month: $1.00 spent of $1.00): the work waits until "
        "it has room."
    )


def test_a_delegation_to_an_agent_with_budget_left_says_nothing_of_it(cast):
    from tests.tasks.conftest import create, post

    managed(cast.alex)
    budget(cast, "agent", "1", spent="0.5", agent=cast.alex)
    task = create(cast.client(cast.sarah), title="Index", agent_id="agent-sarah").json()["id"]
    post(cast.client(cast.sarah), f"/api/tasks/{task}/delegate", {"agent_id": "agent-alex"})
    event = Task.objects.get(pk=task).events.get(kind="delegated")
    assert event.message == "agent-sarah delegated the task to agent-alex."


def test_a_small_budgets_reason_shows_its_money_as_every_page_does():
    from decimal import Decimal

    from costs.holds import hold_reason
    from costs.models import Budget
    from organization.models import Organization

    budget = Budget(
        organization=Organization(name="Acme"),
        scope="organization",
        limit_usd=Decimal("0.01"),
        spent_usd=Decimal("0.004"),
    )
    assert hold_reason(budget).endswith("has no room this month: $0.004 spent of $0.01")
