"""A paused agent makes no model call, whoever sends its run again (docs/runtime.md: "a run
under way when the agent is paused stops before its next model call")."""

import pytest

from organization.models import Agent
from runtime.lease import CLAIMED
from runtime.models import Run
from runtime.runner import run_agent
from runtime.services import run_resume
from tests.fake_llm import ToolUse
from tests.runtime.scripts import calling, managed_by, script
from tests.runtime.test_resume import dies_on_model_call, expire_lease

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_dead_workers_run_resumed_after_its_agent_was_paused_makes_no_model_call(
    cast, fake_llm, monkeypatch
):
    """Alex's worker dies after his first model turn (the run stays `running`); a human pauses
    him; the sweep (or Redis' re-delivery) sends the run again once its lease is stale. The
    claim holds only a *queued* run of a paused agent, and the run's recorder started with
    `agent_paused` false: the resumed run called the model for a paused agent. It goes back
    to `queued` instead, its turns kept, and resuming Alex continues it."""
    managed_by(cast.alex, "openai", "m")
    task = cast.assign(cast.alex)
    script(
        fake_llm,
        cast.alex,
        calling(ToolUse("get_task", {"task_id": task.pk}, id="g1")),
        "Done: the index is there.",
    )
    run = Run.objects.get(agent=cast.alex)
    dies_on_model_call(monkeypatch, run.pk)
    run.refresh_from_db()
    assert run.status == "running" and len(fake_llm.calls_for(agent="agent-alex")) == 1

    Agent.objects.filter(pk=cast.alex.pk).update(is_paused=True)
    expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    assert len(fake_llm.calls_for(agent="agent-alex")) == 1  # no call for a paused agent
    assert run.status == "queued" and len(run.turns) == 2
    task.refresh_from_db()
    assert task.status == "assigned"

    alex = Agent.objects.get(pk=cast.alex.pk)
    alex.is_paused = False
    alex.save()
    run_resume(agent_id=alex.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    task.refresh_from_db()
    assert run.status == "completed"
    assert (task.status, task.result) == ("completed", "Done: the index is there.")
    assert len(fake_llm.calls_for(agent="agent-alex")) == 2
