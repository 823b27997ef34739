"""A task the run only started is completed by its final answer (issue 11 §2: "if the agent
still holds the task in assigned/in_progress and did nothing with it, its final answer completes
it as the result")."""

import pytest

from runtime.models import Run
from tests.fake_llm import ToolUse
from tests.runtime.conftest import drain
from tests.runtime.scripts import call, calling, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_task_the_run_only_moved_to_in_progress_is_completed_by_its_answer(
    cast, fake_llm, provider
):
    """The run's guide tells the model to move a task it does to in_progress first; a model
    that does so and then writes its result as its final answer (instead of calling
    complete_task) counted as having acted on the task: it stayed in_progress for ever, with
    nothing left to wake the agent about it and nothing in "Needs attention"."""
    managed_by(cast.alex, provider)
    task = cast.assign(cast.alex, "Index the orders")
    script(
        fake_llm,
        cast.alex,
        call("update_task_status", task_id=task.pk, status="in_progress"),
        "Added the index on orders(created_at).",
    )
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.turns[1]["status"] == "ok"
    task.refresh_from_db()
    assert (task.status, task.result) == ("completed", "Added the index on orders(created_at).")
    assert run.outcome == [{"task": task.pk, "action": "completed"}]


def test_a_task_the_run_started_and_commented_on_stays_open(cast, fake_llm):
    """Starting it is not acting on it, but a question in a comment still is: the task waits
    for the answer."""
    managed_by(cast.alex)
    task = cast.assign(cast.alex, "Index the orders")
    script(
        fake_llm,
        cast.alex,
        calling(
            ToolUse("update_task_status", {"task_id": task.pk, "status": "in_progress"}),
            ToolUse("comment_on_task", {"task_id": task.pk, "body": "Which table?"}),
        ),
        "Asked which table.",
    )
    drain()
    task.refresh_from_db()
    assert (task.status, task.result) == ("in_progress", "")
