"""A budget that is only *held* full by calls under way is not spent: the managed agents it held
back must run once those calls settle."""

from decimal import Decimal

import pytest

from costs.budgets import budget_set
from costs.metering import Meter, reserve, settle
from costs.tasks import sweep_reservations
from runtime.models import Run, RunTrigger
from runtime.services import sweep_runs
from tasks import services
from tests.runtime.conftest import Cast

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rcast(db, settings):
    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(1), "output": Decimal(2)}}
    return Cast()


def test_an_agent_held_back_by_a_colleagues_call_in_flight_runs_when_the_call_settles(rcast):
    """docs/costs.md: a managed agent "with no budget left" is not run and waits; "raising or
    removing the budget, or a new month" wakes it. `blocking_budget` (costs/budgets.py) judges
    "no budget left" by `state_of`, which counts what calls *under way* hold. So while one agent's
    call holds the organization's budget full, work reaching another managed agent waits (and an
    "exhausted" alert is raised with $0 spent) — and when the call settles for a fraction of its
    worst case, nothing sends `budget_made_room`: the task waits until a human raises the budget
    or the month ends, though the budget has almost all its money left."""
    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    # Alex's run makes a call whose worst case is the whole budget: $2/Mtok × 500,000 = $1.
    ticket = reserve(
        Meter.for_agent(rcast.alex, "run"),
        "openai",
        "fake-model",
        prompt_bound=0,
        max_tokens=500_000,
    )
    assert ticket.record_id is not None
    task = services.task_create(
        org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah
    )
    # The call returns: 10 + 10 tokens, $0.00003 of the $1 budget spent.
    settle(ticket, prompt_tokens=10, completion_tokens=10)
    budget.refresh_from_db()
    assert budget.spent_usd < Decimal("0.001") and budget.reserved_usd == 0

    # Neither the costs sweep nor the runtime's sweep rescues it: the wait is not just a delay.
    sweep_reservations()
    sweep_runs()
    waiting = RunTrigger.objects.filter(agent=rcast.sarah, task=task, run__isnull=True).exists()
    started = Run.objects.filter(agent=rcast.sarah).exists()
    assert started and not waiting, (
        "Sarah's task still waits for budget though the budget has ~$1 left: nothing wakes her"
    )


def test_money_held_raises_no_exhausted_alert_and_money_spent_still_holds_back(rcast):
    """What is held does not hold agents back, nor raise "exhausted" at $0 spent; what is spent
    (or a refused call) still does (docs/costs.md, "When a budget runs out")."""
    from costs.budgets import blocking_budget
    from costs.metering import BudgetExhausted
    from costs.models import BudgetAlert

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    meter = Meter.for_agent(rcast.alex, "run")
    ticket = reserve(meter, "openai", "fake-model", prompt_bound=0, max_tokens=500_000)
    assert blocking_budget(rcast.sarah) is None
    services.task_create(org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah)
    assert not BudgetAlert.objects.exists()
    settle(ticket, prompt_tokens=0, completion_tokens=500_000)  # the whole $1 spent
    assert blocking_budget(rcast.sarah) == budget
    # Raised: a call that does not fit what is left marks the budget for the period.
    budget_set(caller=rcast.human, scope="organization", limit_usd="1.5")
    assert blocking_budget(rcast.sarah) is None
    with pytest.raises(BudgetExhausted):
        reserve(meter, "openai", "fake-model", prompt_bound=0, max_tokens=500_000)
    assert blocking_budget(rcast.sarah) == budget


def test_a_call_refused_for_money_merely_held_does_not_mark_the_budget(rcast):
    """A call refused because a colleague's call holds the budget (not because of what is spent)
    is refused, but does not mark the budget refused for the month: marked, it held every managed
    agent back (and read "exhausted") with ~$1 of $1 left once the colleague's call settled."""
    from costs.budgets import blocking_budget
    from costs.metering import BudgetExhausted
    from costs.models import BudgetAlert

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    alex = reserve(
        Meter.for_agent(rcast.alex, "run"),
        "openai",
        "fake-model",
        prompt_bound=0,
        max_tokens=500_000,
    )  # fmt: skip  (worst case: the whole $1)
    with pytest.raises(BudgetExhausted):  # Sarah's $0.002 call does not fit what is held
        reserve(Meter.for_agent(rcast.sarah, "run"), "openai", "fake-model",
                prompt_bound=0, max_tokens=1000)  # fmt: skip
    settle(alex, prompt_tokens=10, completion_tokens=10)  # $0.00003 spent
    budget.refresh_from_db()
    assert (budget.refused_period, budget.reserved_usd) == ("", 0)
    assert not BudgetAlert.objects.exists()
    task = services.task_create(
        org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah
    )
    assert blocking_budget(rcast.sarah) is None
    assert RunTrigger.objects.filter(agent=rcast.sarah, task=task, run__isnull=False).exists()
