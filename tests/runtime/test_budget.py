"""A managed agent with no budget left is not run (issue 12 §2): the task stays with it, its
trigger waits; raising the budget wakes it. A run's calls are in the ledger with its cost."""

from decimal import Decimal

import pytest

from costs.budgets import blocking_budget, budget_set
from costs.models import Budget, BudgetAlert, UsageRecord
from costs.tasks import sweep_reservations
from runtime.models import Run, RunTrigger
from tests.runtime.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_out_of_budget_is_not_run_until_the_budget_is_raised(cast, settings):
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="0")
    assert blocking_budget(cast.alex) is not None
    task = cast.assign(cast.alex)
    assert not Run.objects.filter(agent=cast.alex).exists()
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == ("assigned", cast.alex.pk)
    assert RunTrigger.objects.filter(agent=cast.alex, run__isnull=True).count() == 1
    # The humans see why, once: the budget's exhausted alert.
    cast.assign(cast.alex, "t2")
    assert list(BudgetAlert.objects.values_list("kind", "budget__agent")) == [
        ("exhausted", cast.alex.pk)
    ]
    # Sarah (same organization, no budget of her own) still runs.
    cast.assign(cast.sarah, "u")
    assert Run.objects.filter(agent=cast.sarah).count() == 1
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="5")
    (run,) = Run.objects.filter(agent=cast.alex)
    assert run.status == "queued" and run.task_id == task.pk
    assert not RunTrigger.objects.filter(agent=cast.alex, run__isnull=True).exists()


def test_a_runs_calls_are_in_the_ledger_with_its_cost(cast, fake_llm, settings, client):
    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(1), "output": Decimal(2)}}
    parent = cast.assign(cast.lena, "parent")
    Run.objects.all().delete()
    task = cast.assign(cast.alex, parent=parent)
    drain()
    run = Run.objects.get(agent=cast.alex)
    rows = UsageRecord.objects.filter(run=run)
    assert rows.exists() and set(rows.values_list("purpose", flat=True)) == {"run"}
    assert set(rows.values_list("task_id", flat=True)) == {task.pk}
    cost = sum(r.cost_usd for r in rows)
    assert cost > 0
    caller = cast.human
    from runtime.selectors import run_for

    assert run_for(caller=caller, run_id=run.pk).cost_usd == cost
    from tasks.serializers import task_detail

    tree = UsageRecord.objects.filter(task_id__in=[parent.pk, task.pk])
    # The parent's figure is its own calls and its subtask's.
    assert Decimal(task_detail(parent)["cost_usd"]) == sum(r.cost_usd for r in tree)
    assert Decimal(task_detail(task)["cost_usd"]) == cost


def test_a_new_month_wakes_the_agents_that_waited_for_it(cast):
    budget, _ = budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="1")
    # Spent out last month: the agent is held while that was the current month.
    Budget.objects.filter(pk=budget.pk).update(spent_usd=1, period="2000-01")
    RunTrigger.objects.create(organization=cast.org, agent=cast.alex, trigger="assigned")
    Budget.objects.filter(pk=budget.pk).update(exhausted_period="2000-01")
    assert not Run.objects.filter(agent=cast.alex).exists()
    assert sweep_reservations() == {"expired": 0, "organizations_woken": 1}
    assert Run.objects.filter(agent=cast.alex, status="queued").count() == 1
    assert sweep_reservations()["organizations_woken"] == 0  # once, not at every sweep


def never_woken_task(cast, agent, title: str):
    """A task the managed `agent` holds and no run was ever woken for (given to it while it was
    external): what a wake-up that is not about it would have its run finish."""
    type(agent).objects.filter(pk=agent.pk).update(runtime="external")
    task = cast.assign(agent, title)
    type(agent).objects.filter(pk=agent.pk).update(runtime="managed")
    return task


def test_setting_or_lowering_a_budget_wakes_nobody(cast):
    never_woken_task(cast, cast.lena, "Plan the quarter")
    budget_set(caller=cast.human, scope="agent", agent="agent-sarah", limit_usd="0")
    budget_set(caller=cast.human, scope="organization", limit_usd="50")
    budget_set(caller=cast.human, scope="organization", limit_usd="50")
    budget_set(caller=cast.human, scope="organization", limit_usd="10")
    assert not Run.objects.exists()


def test_raising_a_budget_wakes_only_the_agents_it_held(cast):
    never_woken_task(cast, cast.lena, "Plan the quarter")
    budget_set(caller=cast.human, scope="team", team="Development", limit_usd="0")
    budget_set(caller=cast.human, scope="organization", limit_usd="50")
    task = cast.assign(cast.alex)
    assert not Run.objects.exists()
    # Raising the organization's budget releases nobody: the team's still holds Alex.
    budget_set(caller=cast.human, scope="organization", limit_usd="80")
    assert not Run.objects.exists()
    budget_set(caller=cast.human, scope="team", team="Development", limit_usd="5")
    assert [(r.agent_id, r.task_id) for r in Run.objects.all()] == [(cast.alex.pk, task.pk)]


def test_removing_a_budget_that_held_an_agent_wakes_it_and_no_one_else(cast):
    never_woken_task(cast, cast.lena, "Plan the quarter")
    budget, _ = budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="0")
    task = cast.assign(cast.alex)
    from costs.budgets import budget_delete

    budget_delete(caller=cast.human, budget=budget)
    assert [(r.agent_id, r.task_id) for r in Run.objects.all()] == [(cast.alex.pk, task.pk)]


def test_a_managed_run_is_not_offered_report_usage(cast, fake_llm):
    """The service meters a managed run's calls itself: a report of its own would count them
    twice, or book whatever the model claims — even when its allow-list names the tool."""
    type(cast.alex).objects.filter(pk=cast.alex.pk).update(
        allowed_tools=["get_my_tasks", "report_usage"]
    )
    cast.assign(cast.alex, "a")
    cast.assign(cast.sarah, "b")
    drain()
    alex, sarah = (fake_llm.calls_for(agent=handle) for handle in ("agent-alex", "agent-sarah"))
    assert alex and alex[0].tool_names == ["get_my_tasks"]
    assert sarah and "report_usage" not in sarah[0].tool_names
    assert "get_task" in sarah[0].tool_names
