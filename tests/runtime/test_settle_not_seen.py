"""The end of a run completes only tasks its model was given as the agent's own work."""

import pytest

from runtime import runner
from runtime.models import Run
from runtime.runner import run_agent
from tasks import services
from tests.runtime.conftest import triggers_of
from tests.runtime.scripts import managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_escalated_to_the_agent_during_its_run_is_not_completed_with_its_answer(
    cast, fake_llm, monkeypatch
):
    """docs/runtime.md: a trigger that arrives while a run runs waits for the one follow-up run;
    the answer of a run completes the tasks "of the run" it did nothing with. Lena created a
    task for Alex; a human's comment wakes her (its creator): her model is given the task as
    Alex's (`you_hold_it: false`). While her run runs, Alex escalates the task to her: that
    wake-up waits for her follow-up. But runner.settle completes every task of the run's
    context the agent holds at its end — so the escalated task, which her model never saw as
    hers, is completed with her unrelated answer, and the follow-up finds it finished and
    makes no model call: the escalation is never worked."""
    managed_by(cast.lena)
    task = cast.assign(cast.alex, "Index orders", by=cast.actor(cast.lena))
    Run.objects.all().delete()
    services.task_comment(task=task, actor=cast.by_human, body="Status, please?")
    lena_run = Run.objects.get(agent=cast.lena)
    script(fake_llm, cast.lena, "Noted; Alex is on it.")

    real = runner.TurnRecorder.complete

    def alex_escalates_meanwhile(self, request):
        if self.run.pk == lena_run.pk and not getattr(self, "escalated", False):
            self.escalated = True
            services.task_escalate(task=task, actor=cast.actor(cast.alex), reason="Need help")
        return real(self, request)

    monkeypatch.setattr(runner.TurnRecorder, "complete", alex_escalates_meanwhile)
    run_agent(lena_run.pk)

    lena_run.refresh_from_db()
    task.refresh_from_db()
    assert lena_run.context["tasks"][0]["you_hold_it"] is False  # what her model was given
    follow_up = Run.objects.get(agent=cast.lena, previous=lena_run)
    assert triggers_of(follow_up) == [("escalated", task.pk)]
    assert (task.status, task.assignee_id) == ("assigned", cast.lena.pk), (
        task.status,
        task.result,
        lena_run.outcome,
    )
