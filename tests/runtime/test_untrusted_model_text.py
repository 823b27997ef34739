"""What a model says is untrusted text: the run keeps it, whatever characters it holds."""

import pytest

from organization.models import Agent
from runtime.models import Run
from tasks import services
from tests.fake_llm import Reply
from tests.runtime.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lone_surrogate_in_the_final_answer_still_completes_the_task(cast, fake_llm):
    """docs/runtime.md: the model's final answer completes the task it did nothing with; the
    runtime already keeps a NUL a model says (tests/runtime/test_untrusted_output.py: replaced,
    the task still completed). A lone surrogate — what a reply cut in the middle of an emoji's
    JSON escape (`\\ud83d`) decodes to — is as unstorable in PostgreSQL, but nothing replaces
    it (collaboration/providers/base.py `_without_nul` handles NUL only): recording the model
    turn fails, the runner's catch-all fails the run with an "internal error" and blocks the
    task, and the model's answer is lost."""
    Agent.objects.filter(pk=cast.alex.pk).update(llm_provider="openai", llm_model="m-1")
    fake_llm.on(agent="agent-alex", replies=[Reply("Added the index \ud83d")])
    task = services.task_create(
        org=cast.org, actor=cast.by_human, title="Index", assignee=cast.alex
    )
    (run_id,) = drain()
    run = Run.objects.get(pk=run_id)
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed"), (run.error, task.status)
