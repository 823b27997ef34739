"""What a model says is untrusted text: the run keeps it, whatever characters it holds."""

import pytest

from runtime.models import Run
from tests.runtime.conftest import drain
from tests.runtime.scripts import managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lone_surrogate_in_the_final_answer_still_completes_the_task(cast, fake_llm):
    """docs/runtime.md: the model's final answer completes the task it did nothing with; the
    runtime already keeps a NUL a model says (tests/runtime/test_untrusted_output.py: replaced,
    the task still completed). A lone surrogate — what a reply cut in the middle of an emoji's
    JSON escape (`\\ud83d`) decodes to — is as unstorable in PostgreSQL, but nothing replaces
    it (collaboration/providers/base.py `_without_nul` handles NUL only): recording the model
    turn fails, the runner's catch-all fails the run with an "internal error" and blocks the
    task, and the model's answer is lost."""
    managed_by(cast.alex)
    script(fake_llm, cast.alex, "Added the index \ud83d")
    task = cast.assign(cast.alex, "Index")
    (run_id,) = drain()
    run = Run.objects.get(pk=run_id)
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed"), (run.error, task.status)
