"""A managed run keeps what a model says even when it holds a NUL or arguments nested past what the
API renders: the task is still done and the run stays readable (tests/collaboration/
test_untrusted_output.py for sessions)."""

import pytest

from runtime.models import Run
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.fake_llm import ToolUse
from tests.runtime.scripts import calling, managed_by, script

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alex_on_openai(cast, fake_llm):
    managed_by(cast.alex)
    return cast


def test_a_nul_in_the_final_answer_still_completes_the_task(alex_on_openai, fake_llm):
    cast = alex_on_openai
    script(fake_llm, cast.alex, "Added the\x00 index.")
    task = cast.assign(cast.alex, "Index")
    (run_id,) = drain()
    task.refresh_from_db()
    assert (Run.objects.get(pk=run_id).status, task.status) == ("completed", "completed")
    assert task.result == "Added the\ufffd index."


def test_arguments_nested_past_the_renderer_are_refused_and_the_run_reads(alex_on_openai, fake_llm):
    cast = alex_on_openai
    deep = '{"filter": ' + "[" * 300 + "]" * 300 + "}"
    script(fake_llm, cast.alex, calling(ToolUse("get_organization_roster", deep)), "Done.")
    cast.assign(cast.alex, "Index")
    (run_id,) = drain()
    response = KeyClient(make_key(cast.org)).get(f"/api/runs/{run_id}")
    assert response.status_code == 200
    (call,) = [t for t in response.json()["turns"] if t.get("name") == "get_organization_roster"]
    assert (call["status"], call["error"]["code"]) == ("error", "invalid_arguments")
