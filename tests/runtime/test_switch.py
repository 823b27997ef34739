"""An agent made managed in the admin is run at once for the work it already holds (and an
agent made external again is not)."""

import pytest
from django.contrib.auth import get_user_model

from runtime.lease import CLAIMED
from runtime.models import Run
from runtime.runner import run_agent
from tests.organization.test_admin import change_url, form_of
from tests.runtime.scripts import calling, looks_while, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def switch(client, agent, runtime: str):
    url = change_url(agent)
    data = form_of(client, url, "agent_form")
    data["runtime"] = runtime
    response = client.post(url, data)
    assert response.status_code == 302, response.context["errors"]


def test_an_agent_made_managed_is_woken_for_the_tasks_it_holds(cast, client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    task = cast.assign(cast.morgan)
    assert not Run.objects.filter(agent=cast.morgan).exists()  # external: it calls us
    switch(client, cast.morgan, "managed")
    (run,) = Run.objects.filter(agent=cast.morgan)
    assert (run.status, run.task_id, run.trigger) == ("queued", task.pk, "resumed")
    Run.objects.all().delete()
    switch(client, cast.morgan, "external")
    assert not Run.objects.exists()


def test_an_agent_made_external_while_its_run_is_queued_and_managed_again_is_woken_again(
    cast, client
):
    """Alex's run is queued for his task; he is made external before a worker takes it, so the
    run fails without a model call (nothing was run). Made managed again, he still holds the
    task, never started and seen by no run: he is woken for it, as the switch promises. The
    failed run's trigger counted as a run having seen the task: no run ever came, the task
    stayed `assigned` for ever (and the sweep does not look at items from before a switch)."""
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    task = cast.assign(cast.alex)
    (queued,) = Run.objects.filter(agent=cast.alex)
    switch(client, cast.alex, "external")
    assert run_agent(queued.pk) == CLAIMED
    queued.refresh_from_db()
    assert queued.status == "failed" and "no longer managed" in queued.error
    switch(client, cast.alex, "managed")
    runs = list(Run.objects.filter(agent=cast.alex).order_by("pk"))
    assert len(runs) == 2, runs
    assert (runs[1].status, runs[1].task_id, runs[1].trigger) == ("queued", task.pk, "resumed")


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_an_agent_made_external_while_its_run_is_under_way_stops_before_the_next_model_call(
    cast, fake_llm, vendor, monkeypatch
):
    """A team switches Alex to external while his run is under way (here, as the model asks
    for its first tool call): "we run it ourselves now". The call asked for still runs; the
    run makes no further model call (two drivers would act as one agent), and ends, failed
    with the reason, his task untouched (still assigned to him, for the external driver). The
    run kept calling the model and acting as him. Made managed again, he is woken for the
    task (the stopped run did not finish it), as the switch promises."""
    from django.db import connection

    import runtime.sql
    from organization.models import Agent
    from runtime.services import run_resume
    from tests.runtime.conftest import drain
    from tests.vendor import SaysItIs

    monkeypatch.setattr(runtime.sql, "connection", SaysItIs(connection, vendor))
    managed_by(cast.alex)

    team_switches_him = Agent.objects.filter(pk=cast.alex.pk).update
    looks_while(fake_llm, cast.alex, lambda: team_switches_him(runtime="external"))
    task = cast.assign(cast.alex, "Index the orders")
    (run,) = Run.objects.all()
    assert drain() == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.outcome) == (
        "failed",
        [{"task": task.pk, "action": "none", "why": "its agent was made external"}],
    )
    assert run.error.startswith("The agent was made external while its run was under way")
    assert run.finished_at is not None and run.lease_token == ""
    assert [(t["kind"], t.get("status")) for t in run.turns] == [
        ("model", None),
        ("tool_call", "ok"),
    ]
    assert len(fake_llm.calls_for(agent="agent-alex")) == 1
    task.refresh_from_db()
    assert (task.status, task.assignee) == ("assigned", cast.alex)

    Agent.objects.filter(pk=cast.alex.pk).update(runtime="managed")
    again = run_resume(agent_id=cast.alex.pk)
    assert (again.status, again.task_id, again.trigger) == ("queued", task.pk, "resumed")
    assert drain() == [again.pk]
    task.refresh_from_db()
    assert (task.status, task.result) == ("completed", "Indexed.")


def test_a_dead_workers_run_sent_again_after_its_agent_was_made_external_stops_too(
    cast, fake_llm, monkeypatch
):
    """Alex's worker dies after his first model turn; the team makes him external; the run is
    sent again once its lease is stale. It makes no model call and ends as one stopped under
    way (its tasks left as they were), so that made managed again he is woken for his task:
    the run failed as "no longer managed" with its input stored, which counted as having seen
    the task, and no run ever came for it."""
    from organization.models import Agent
    from runtime.services import run_resume
    from tests.fake_llm import ToolUse
    from tests.runtime.test_resume import dies_on_model_call, expire_lease

    managed_by(cast.alex, "openai", "m")
    task = cast.assign(cast.alex)
    script(
        fake_llm, cast.alex, calling(ToolUse("get_task", {"task_id": task.pk}, id="g1")), "Done."
    )
    run = Run.objects.get(agent=cast.alex)
    dies_on_model_call(monkeypatch, run.pk)

    Agent.objects.filter(pk=cast.alex.pk).update(runtime="external")
    expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    assert len(fake_llm.calls_for(agent="agent-alex")) == 1
    task.refresh_from_db()
    assert task.status == "assigned"

    Agent.objects.filter(pk=cast.alex.pk).update(runtime="managed")
    again = run_resume(agent_id=cast.alex.pk)
    assert again is not None and (again.task_id, again.trigger) == (task.pk, "resumed")
    assert run.status == "failed"
    assert run.error.startswith("The agent was made external while its run was under way")
