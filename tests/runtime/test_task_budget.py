"""A task budget covers every managed run on its task (docs/costs.md)."""

from decimal import Decimal

import pytest

from costs.budgets import budget_set
from costs.models import UsageRecord
from runtime.models import Run
from tests.runtime.conftest import drain, triggers_of
from tests.runtime.scripts import script

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_carrying_a_task_whose_budget_is_exhausted_makes_no_model_call_for_it(
    cast, fake_llm, settings
):
    """docs/costs.md: a `task` budget covers "calls made for the task or any of its subtasks
    (a managed agent's run on it …)", and budgets are checked before each call: "a call whose
    worst case does not fit is not made". A run carries several tasks when triggers join it
    (docs/runtime.md), but runner.TurnRecorder meters its calls for `run.task_id` only (the
    first trigger's task tree). So task B, whose budget is spent, is worked by a paid model
    call anyway — and completed with the answer — because it rode along with task A."""
    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(1), "output": Decimal(2)}}
    script(fake_llm, cast.alex, "Done, both of them.")
    a = cast.assign(cast.alex, "A")
    b = cast.assign(cast.alex, "B")
    (run,) = Run.objects.filter(agent=cast.alex)
    assert triggers_of(run) == [("created", a.pk), ("created", b.pk)]  # B joined A's run
    budget_set(caller=cast.human, scope="task", task=b.pk, limit_usd="0")  # nothing for B

    drain()
    b.refresh_from_db()
    paid = UsageRecord.objects.filter(run=run, cost_usd__gt=0).count()
    assert b.status != "completed" and paid == 0, (b.status, b.result, paid)
