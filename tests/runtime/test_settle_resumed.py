"""A run whose worker died after its end had completed a task, before the run was finished:
the resumed run finishes it, and its `outcome` still says what its end did to each task."""

import pytest

from runtime import services as runtime_services
from runtime.lease import CLAIMED
from runtime.models import Run
from runtime.runner import run_agent
from tasks.models import TaskEvent
from tests.runtime.scripts import managed_by, script
from tests.runtime.test_resume import WorkerDied, expire_lease

pytestmark = pytest.mark.django_db(transaction=True)


def dies_finishing(monkeypatch, run_id: int) -> None:
    """Run `run_id` to its end, where its worker dies as the run is about to be finished (its
    tasks settled, the run still `running`)."""
    real = runtime_services.run_finish

    def dies(**kwargs):
        raise WorkerDied

    monkeypatch.setattr(runtime_services, "run_finish", dies)
    with pytest.raises(WorkerDied):
        run_agent(run_id)
    monkeypatch.setattr(runtime_services, "run_finish", real)


def test_a_run_resumed_after_its_end_completed_a_task_still_lists_it_in_its_outcome(
    cast, fake_llm, monkeypatch
):
    """Alex's answer completes his task, and his worker dies before the run is finished. The
    resumed run finds the task completed (not his to settle any more) and finishes: its outcome
    was empty, as if its end had done nothing. It lists the task as completed, once, from the
    task's audit trail; nothing is written twice and no model is called again."""
    managed_by(cast.alex, "openai", "m")
    script(fake_llm, cast.alex, "Indexed.")
    done = cast.assign(cast.alex, "Index it")
    run = Run.objects.get(agent=cast.alex)
    dies_finishing(monkeypatch, run.pk)
    run.refresh_from_db()
    done.refresh_from_db()
    assert (run.status, done.status, done.result) == ("running", "completed", "Indexed.")

    expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("completed", 2)
    assert run.outcome == [{"task": done.pk, "action": "completed"}]
    assert TaskEvent.objects.filter(task=done, after__status="completed").count() == 1
    assert len(fake_llm.calls_for(agent="agent-alex")) == 1


def test_a_run_resumed_after_its_answer_completed_a_subtask_asks_for_its_parent(
    cast, fake_llm, monkeypatch
):
    """Lena's run, woken for a part of her launch, completes it with its answer: the last open
    subtask of a parent she holds, her own act (no subtasks_done wakes her), so its end asks for
    a follow-up about the parent. Her worker dies before the run is finished. The resumed run
    finishes it with that follow-up (asked for once: its trigger waited) and its outcome lists
    the part it completed (it was empty)."""
    managed_by(cast.lena, "openai", "m")
    script(fake_llm, cast.lena, "Announced.")
    parent = cast.assign(cast.lena, "Launch")
    Run.objects.all().delete()  # her run for the launch is not this story
    part = cast.assign(cast.lena, "Announce", parent=parent)
    run = Run.objects.get(agent=cast.lena)
    dies_finishing(monkeypatch, run.pk)
    part.refresh_from_db()
    assert part.status == "completed"

    expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    (follow_up,) = Run.objects.filter(agent=cast.lena, status="queued")
    assert (follow_up.trigger, follow_up.task_id, follow_up.previous_id) == (
        "subtasks_done",
        parent.pk,
        run.pk,
    )
    assert list(follow_up.triggers.values_list("trigger", "task_id")) == [
        ("subtasks_done", parent.pk)
    ]
    run.refresh_from_db()
    assert run.outcome == [{"task": part.pk, "action": "completed"}]
