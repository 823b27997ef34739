"""A managed run keeps what a model says even when it holds a NUL or arguments nested past what the
API renders: the task is still done and the run stays readable (tests/collaboration/
test_untrusted_output.py for sessions)."""

import pytest

from organization.models import Agent
from runtime.models import Run
from tasks import services
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.fake_llm import Reply, ToolUse

from .conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alex_on_openai(cast, fake_llm):
    Agent.objects.filter(pk=cast.alex.pk).update(llm_provider="openai", llm_model="m-1")
    return cast


def test_a_nul_in_the_final_answer_still_completes_the_task(alex_on_openai, fake_llm):
    cast = alex_on_openai
    fake_llm.on(agent="agent-alex", replies=[Reply("Added the\x00 index.")])
    task = services.task_create(
        org=cast.org, actor=cast.by_human, title="Index", assignee=cast.alex
    )
    (run_id,) = drain()
    task.refresh_from_db()
    assert (Run.objects.get(pk=run_id).status, task.status) == ("completed", "completed")
    assert task.result == "Added the\ufffd index."


def test_arguments_nested_past_the_renderer_are_refused_and_the_run_reads(alex_on_openai, fake_llm):
    cast = alex_on_openai
    deep = '{"filter": ' + "[" * 300 + "]" * 300 + "}"
    fake_llm.on(
        agent="agent-alex",
        replies=[
            Reply(tool_calls=[ToolUse("get_organization_roster", deep)]),
            Reply("Done."),
        ],
    )
    services.task_create(org=cast.org, actor=cast.by_human, title="Index", assignee=cast.alex)
    (run_id,) = drain()
    response = KeyClient(make_key(cast.org)).get(f"/api/runs/{run_id}")
    assert response.status_code == 200
    (call,) = [t for t in response.json()["turns"] if t.get("name") == "get_organization_roster"]
    assert (call["status"], call["error"]["code"]) == ("error", "invalid_arguments")
