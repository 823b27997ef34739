"""A budget that is only *held* full by calls under way is not spent: the managed agents it held
back must run once those calls settle."""

from decimal import Decimal

import pytest
from django.conf import settings as settings_module

from costs.budgets import budget_set
from costs.metering import settle
from costs.tasks import sweep_reservations
from runtime.models import Run, RunTrigger
from runtime.services import sweep_runs
from tasks import services
from tests.runtime.conftest import Cast

from .conftest import hold

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
    ticket = hold(rcast.alex, prompt_bound=0, max_tokens=500_000)
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
    ticket = hold(rcast.alex, prompt_bound=0, max_tokens=500_000)
    assert blocking_budget(rcast.sarah) is None
    services.task_create(org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah)
    assert not BudgetAlert.objects.exists()
    settle(ticket, prompt_tokens=0, completion_tokens=500_000)  # the whole $1 spent
    assert blocking_budget(rcast.sarah) == budget
    # Raised: a call that does not fit what is left marks the budget for the period.
    budget_set(caller=rcast.human, scope="organization", limit_usd="1.5")
    assert blocking_budget(rcast.sarah) is None
    with pytest.raises(BudgetExhausted):
        hold(rcast.alex, prompt_bound=0, max_tokens=500_000)
    assert blocking_budget(rcast.sarah) == budget


def test_a_budget_held_full_by_a_call_under_way_reads_warning_not_exhausted(rcast):
    """Only money spent exhausts a budget: what a call holds may settle for far less."""
    from costs.budgets import state_of
    from costs.models import Budget

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    ticket = hold(rcast.alex, prompt_bound=0, max_tokens=500_000)  # worst case: the whole $1
    assert state_of(Budget.objects.get(pk=budget.pk)) == "warning"
    settle(ticket, prompt_tokens=0, completion_tokens=500_000)  # the whole $1 spent
    assert state_of(Budget.objects.get(pk=budget.pk)) == "exhausted"


def test_a_call_refused_for_money_merely_held_does_not_mark_the_budget(rcast):
    """A call refused because a colleague's call holds the budget (not because of what is spent)
    is refused, but does not mark the budget refused for the month: marked, it held every managed
    agent back (and read "exhausted") with ~$1 of $1 left once the colleague's call settled."""
    from costs.budgets import blocking_budget
    from costs.metering import BudgetExhausted
    from costs.models import BudgetAlert

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    alex = hold(rcast.alex, prompt_bound=0, max_tokens=500_000)  # worst case: the whole $1
    with pytest.raises(BudgetExhausted):  # Sarah's $0.002 call does not fit what is held
        hold(rcast.sarah, prompt_bound=0, max_tokens=1000)
    settle(alex, prompt_tokens=10, completion_tokens=10)  # $0.00003 spent
    budget.refresh_from_db()
    assert (budget.refused_period, budget.reserved_usd) == ("", 0)
    assert not BudgetAlert.objects.exists()
    task = services.task_create(
        org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah
    )
    assert blocking_budget(rcast.sarah) is None
    assert RunTrigger.objects.filter(agent=rcast.sarah, task=task, run__isnull=False).exists()


def test_a_call_refused_for_money_merely_held_waits_and_goes_on_when_it_settles(rcast, fake_llm):
    """The run is not failed (nor its tasks blocked): it goes back to the queue, saying why it
    waits, and the budget is not marked."""
    from costs.models import Budget
    from runtime.models import RunStatus
    from tests.runtime.conftest import drain

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    Agent = type(rcast.alex)
    Agent.objects.filter(pk=rcast.sarah.pk).update(llm_provider="openai", llm_model="fake-model")
    alex = hold(rcast.alex, prompt_bound=0, max_tokens=500_000)  # worst case: the whole $1
    task = services.task_create(
        org=rcast.org, actor=rcast.by_human, title="t", assignee=rcast.sarah
    )
    (run,) = Run.objects.filter(agent=rcast.sarah)
    from runtime.runner import WAITING, run_agent

    assert run_agent(run.pk) == WAITING
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, task.status) == (RunStatus.QUEUED, "assigned")
    assert run.error.startswith("Waiting for budget headroom: The organization budget of")
    assert Budget.objects.get(pk=budget.pk).refused_period == ""
    settle(alex, prompt_tokens=10, completion_tokens=10)
    drain()
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, run.error, task.status) == ("completed", "", "completed")


def test_one_call_too_big_for_a_budget_mostly_unspent_does_not_exhaust_the_month(rcast):
    """Refused (what is left cannot hold it), but the budget does not hold everyone back."""
    from costs.budgets import blocking_budget, state_of
    from costs.metering import BudgetExhausted
    from costs.models import Budget, BudgetAlert

    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="1")
    with pytest.raises(BudgetExhausted) as refused:  # $2 at worst, of $1
        hold(rcast.alex, prompt_bound=0, max_tokens=1_000_000)
    assert not refused.value.held_only
    budget = Budget.objects.get(pk=budget.pk)
    assert (budget.refused_period, state_of(budget)) == ("", "ok")
    assert blocking_budget(rcast.sarah) is None and not BudgetAlert.objects.exists()


@pytest.fixture
def worker(settings):
    import redis
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with start_worker(
        app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING"
    ):
        yield


@pytest.mark.worker
@pytest.mark.skipif(
    "postgresql" not in settings_module.DATABASES["default"]["ENGINE"]
    or not settings_module.REDIS_URL,
    reason="a real worker on PostgreSQL and Redis",
)
def test_twenty_runs_racing_for_a_little_headroom_all_finish_and_overspend_nothing(
    rcast, fake_llm, worker, settings
):
    """Each call costs $0.0018 but holds ~$2.60 at worst: with $6 of headroom two fit at a time.
    The others wait for the held money to settle — none fails, no task is blocked, the budget
    is spent by what the calls cost and never past its limit, and it reads `ok`."""
    from costs.budgets import state_of
    from costs.models import Budget, BudgetAlert, UsageRecord
    from tests.factories import make_agent
    from tests.fake_llm import Reply
    from tests.runtime.conftest import wait_for

    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(100), "output": Decimal(100)}}
    settings.RUNTIME_BUDGET_WAIT_SECONDS = 0.2
    settings.RUNTIME_LEASE_SECONDS = 4  # the back-off's cap
    fake_llm.on(replies=[Reply("Done.", prompt_tokens=15, completion_tokens=3, delay=0.3)])
    budget, _ = budget_set(caller=rcast.human, scope="organization", limit_usd="6")
    agents = [
        make_agent(rcast.org, f"agent-r{i:02}", name=f"R{i}", runtime="managed") for i in range(20)
    ]
    tasks = [
        services.task_create(org=rcast.org, actor=rcast.by_human, title=f"t{i}", assignee=agent)
        for i, agent in enumerate(agents)
    ]
    seen_waiting = []

    def all_finished():
        runs = Run.objects.filter(agent__in=agents)
        if runs.filter(status="queued", error__startswith="Waiting for budget headroom").exists():
            seen_waiting.append(True)
        return runs.count() == 20 and not runs.exclude(status__in=["completed", "failed"]).exists()

    wait_for(all_finished, timeout=180, interval=0.05)
    runs = Run.objects.filter(agent__in=agents)
    assert sorted(runs.values_list("status", flat=True)) == ["completed"] * 20, list(
        runs.exclude(status="completed").values_list("error", flat=True)
    )
    statuses = {t.status for t in type(tasks[0]).objects.filter(pk__in=[t.pk for t in tasks])}
    assert statuses == {"completed"}
    assert seen_waiting, "no run waited: the race did not happen"
    budget = Budget.objects.get(pk=budget.pk)
    booked = sum(r.cost_usd for r in UsageRecord.objects.filter(organization=rcast.org))
    assert budget.reserved_usd == 0 and budget.spent_usd == booked <= budget.limit_usd
    assert (state_of(budget), budget.refused_period) == ("ok", "")
    assert not BudgetAlert.objects.exists()
