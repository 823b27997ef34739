"""The end of a run completes only the tasks the run did nothing with (docs/runtime.md)."""

import pytest

from runtime.models import Run
from tasks.models import TaskComment
from tests.runtime.conftest import drain
from tests.runtime.scripts import call, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_the_run_commented_on_with_a_float_id_is_not_completed_by_the_answer(cast, fake_llm):
    """docs/runtime.md ("The end"): a task on which the run made a successful writing tool call
    naming it as `task_id` is left as it is — a run that asked a question in a comment leaves the
    task open for the answer. The tools validate `task_id` with DRF's IntegerField, which takes
    the JSON number 12.0 (what several OpenAI-compatible servers emit for integers) as task 12,
    so the comment lands on the task; but runner._acted_on counts only `int` or digit strings,
    so it decides the run did nothing with the task and completes it with the final answer."""
    managed_by(cast.alex)
    task = cast.assign(cast.alex, "Index the orders")
    script(
        fake_llm,
        cast.alex,
        call("comment_on_task", task_id=float(task.pk), body="Which table is slow?"),
        "I asked which table is slow; waiting for the answer.",
    )
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.turns[1]["status"] == "ok"  # the comment was made, on this task
    assert TaskComment.objects.filter(task=task, body="Which table is slow?").exists()
    task.refresh_from_db()
    assert task.status == "assigned", (task.status, task.result, run.outcome)
