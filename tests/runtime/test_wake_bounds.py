"""The bounds of managed agents waking one another (docs/runtime.md, "What wakes a managed agent"):
a wake-up another run's act caused is held past RUNTIME_MAX_CHAIN_RUNS runs in a row or the woken
agent's RUNTIME_MAX_AGENT_RUNS_PER_HOUR runs this hour — recorded, taken by no run, resent by no
sweep and no resumption — and a human's release wakes the agent as a human's act does."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from organization.models import Agent
from organization.services import agent_set_paused
from runtime import services as runtime_services
from runtime.models import Run, RunStatus, RunTrigger
from runtime.services import current_run, run_release
from tasks import services
from tasks.models import InboxItem, Task
from tests.conftest import KeyClient
from tests.factories import make_admin_user, make_key
from tests.runtime.conftest import drain, runs_of

pytestmark = pytest.mark.django_db(transaction=True)


def a_run(cast, agent, depth: int, **fields) -> Run:
    return Run.objects.create(
        organization=cast.org,
        agent=agent,
        trigger="created",
        status=RunStatus.COMPLETED,
        depth=depth,
        **fields,
    )


def as_run(run: Run, move):
    """Make `move` as if a tool call of `run` made it (its wake-ups record `run` as the cause)."""
    token = current_run.set(run.pk)
    try:
        return move()
    finally:
        current_run.reset(token)


def task_for(cast, agent, by_run: Run | None = None, title: str = "t") -> Task:
    def move():
        return cast.assign(agent, title, by=cast.actor(cast.lena))

    return as_run(by_run, move) if by_run else move()


# --- the chain's length --------------------------------------------------------------------------


def test_a_run_woken_by_another_run_is_one_deeper_in_its_chain(cast):
    lenas = a_run(cast, cast.lena, depth=4)
    task = task_for(cast, cast.alex, by_run=lenas)
    (run,) = Run.objects.filter(agent=cast.alex)
    assert (run.depth, run.status) == (5, "queued")
    trigger = RunTrigger.objects.get(task=task)
    assert (trigger.woken_by_id, trigger.depth, trigger.held) == (lenas.pk, 4, "")
    body = KeyClient(make_key(cast.org)).get(f"/api/runs/{run.pk}").json()
    assert (body["depth"], body["triggers"][0]["woken_by"]) == (5, lenas.pk)


def test_a_humans_act_starts_a_chain_of_its_own(cast):
    cast.assign(cast.alex)
    assert Run.objects.get(agent=cast.alex).depth == 1


def test_the_chain_wakes_up_to_its_bound_and_holds_the_wake_up_past_it(cast, settings):
    settings.RUNTIME_MAX_CHAIN_RUNS = 5
    fourth = task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=4), title="4")
    assert Run.objects.get(agent=cast.alex).depth == 5  # the fifth run in a row: the bound
    fifth = task_for(cast, cast.sarah, by_run=a_run(cast, cast.lena, depth=5), title="5")
    assert not Run.objects.filter(agent=cast.sarah).exists()
    held = RunTrigger.objects.get(task=fifth)
    assert (held.run, held.held, held.trigger, held.depth) == (None, "chain", "created", 5)
    assert "5 runs in a row" in held.held_because
    # Nothing is lost: the task stays with Sarah, assigned, and its wake-up is recorded.
    fifth.refresh_from_db()
    assert (fifth.status, fifth.assignee) == ("assigned", cast.sarah)
    assert RunTrigger.objects.get(task=fourth).held == ""


def test_a_held_wake_up_does_not_join_the_agents_queued_run(cast, settings):
    settings.RUNTIME_MAX_CHAIN_RUNS = 3
    cast.assign(cast.alex, "mine")
    (queued,) = Run.objects.filter(agent=cast.alex)
    late = task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=3), title="late")
    assert RunTrigger.objects.get(task=late).run is None
    assert list(queued.triggers.values_list("task__title", flat=True)) == ["mine"]


def test_a_follow_up_run_is_as_deep_as_the_shallowest_wake_up_it_takes(cast):
    first = cast.assign(cast.alex, "1")
    (run,) = Run.objects.all()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, lease_token="tok")
    task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=7), title="deep")
    services.task_comment(task=first, actor=cast.by_human, body="and this")
    runtime_services.run_finish(run=run, token="tok", status=RunStatus.COMPLETED)
    follow_up = Run.objects.get(agent=cast.alex, status="queued")
    assert (follow_up.previous_id, follow_up.depth) == (run.pk, 1)  # the human's comment
    # Only deep wake-ups waited: the follow-up continues their chain.
    Run.objects.filter(pk=follow_up.pk).update(status=RunStatus.RUNNING, lease_token="tok2")
    task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=7), title="deeper")
    task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=9), title="deepest")
    runtime_services.run_finish(run=follow_up, token="tok2", status=RunStatus.COMPLETED)
    assert Run.objects.get(agent=cast.alex, status="queued").depth == 8


# --- the agent's runs this hour -----------------------------------------------------------------


def test_an_agent_woken_by_runs_is_held_at_its_runs_this_hour(cast, settings):
    settings.RUNTIME_MAX_AGENT_RUNS_PER_HOUR = 3
    old = a_run(cast, cast.sarah, depth=1)
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=61))
    for _ in range(2):
        a_run(cast, cast.sarah, depth=1)
    lenas = a_run(cast, cast.lena, depth=1)
    third = task_for(cast, cast.sarah, by_run=lenas, title="third")
    assert RunTrigger.objects.get(task=third).held == ""
    assert Run.objects.filter(agent=cast.sarah, status="queued").count() == 1  # its third
    Run.objects.filter(agent=cast.sarah).update(status=RunStatus.COMPLETED)
    fourth = task_for(cast, cast.sarah, by_run=lenas, title="fourth")
    held = RunTrigger.objects.get(task=fourth)
    assert (held.run, held.held) == (None, "agent_hour")
    assert not Run.objects.filter(agent=cast.sarah, status="queued").exists()
    # A human's act is never held: it starts a chain of its own.
    cast.assign(cast.sarah, "human")
    assert Run.objects.filter(agent=cast.sarah, status="queued").count() == 1


# --- held, and released -------------------------------------------------------------------------


def held_task(cast, settings) -> Task:
    settings.RUNTIME_MAX_CHAIN_RUNS = 2
    task = task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=2), title="held")
    assert RunTrigger.objects.get(task=task).held == "chain"
    return task


def test_the_sweep_does_not_send_a_held_wake_up_again(cast, settings):
    task = held_task(cast, settings)
    InboxItem.objects.filter(task=task).update(created_at=timezone.now() - timedelta(hours=1))
    assert runtime_services.sweep_runs()["woken"] == []
    assert not Run.objects.filter(agent=cast.alex).exists()


def test_resuming_the_agent_does_not_wake_it_for_a_held_wake_up(cast, settings):
    held_task(cast, settings)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=True)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    assert not Run.objects.filter(agent=cast.alex).exists()


def test_releasing_wakes_the_agent_as_a_humans_act(cast, settings, offline):
    task = held_task(cast, settings)
    assert run_release(organization_id=cast.org.pk, task_id=task.pk) == 1
    (run,) = Run.objects.filter(agent=cast.alex)
    assert (run.status, run.trigger, run.task_id, run.depth) == ("queued", "created", task.pk, 1)
    trigger = RunTrigger.objects.get(task=task)
    assert (trigger.run, trigger.held, trigger.depth) == (run, "", 0)
    assert trigger.released_at is not None
    drain()
    task.refresh_from_db()
    assert task.status == "completed"
    assert run_release(organization_id=cast.org.pk, task_id=task.pk) == 0


def test_a_release_is_scoped_to_the_organization(cast, settings):
    task = held_task(cast, settings)
    assert run_release(organization_id=cast.other.pk, task_id=task.pk) == 0
    assert run_release(organization_id=cast.other.pk) == 0
    assert RunTrigger.objects.get(task=task).held == "chain"


def test_a_paused_agents_released_wake_up_waits_for_its_resumption(cast, settings):
    task = held_task(cast, settings)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=True)
    assert run_release(organization_id=cast.org.pk, agent_ids=[cast.alex.pk]) == 1
    assert not Run.objects.filter(agent=cast.alex).exists()
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    assert runs_of(cast.alex) == [("queued", "created", task.pk)]


# --- in the admin ---------------------------------------------------------------------------------


def test_the_task_page_says_why_its_wake_up_is_held_and_its_button_releases_it(
    cast, settings, client, offline
):
    task = held_task(cast, settings)
    client.force_login(make_admin_user(cast.org))
    page = client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    assert 'id="held-wakes-banner"' in page
    assert "2 runs in a row had woken one another" in page and "Alex" in page
    release = reverse("admin:tasks_task_runtime_release", args=[task.pk])
    assert client.get(release).status_code == 405
    assert client.post(release).status_code == 302
    assert runs_of(cast.alex) == [("queued", "created", task.pk)]
    page = client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    assert 'id="held-wakes-banner"' not in page


def test_another_organizations_staff_cannot_release(cast, settings, client):
    task = held_task(cast, settings)
    client.force_login(make_admin_user(cast.other))
    response = client.post(reverse("admin:tasks_task_runtime_release", args=[task.pk]))
    assert response.status_code == 404
    assert RunTrigger.objects.get(task=task).held == "chain"
    assert not Run.objects.filter(agent=cast.alex).exists()


def test_the_agents_action_releases_their_held_wake_ups(cast, settings, client):
    task = held_task(cast, settings)
    client.force_login(make_admin_user(cast.org))
    client.post(
        reverse("admin:organization_agent_changelist"),
        {"action": "release_held_wakes", "_selected_action": [cast.alex.pk]},
    )
    assert runs_of(cast.alex) == [("queued", "created", task.pk)]
    assert RunTrigger.objects.get(task=task).held == ""


def test_the_dashboard_counts_the_task_under_needs_attention(cast, settings, client):
    held_task(cast, settings)
    client.force_login(make_admin_user(cast.org))
    page = client.get(reverse("admin:index"), {"organization": cast.org.pk}).content.decode()
    assert re.search(r'data-metric="held_wakes">1<', page)
    assert re.search(r'data-metric="needs_attention">1<', page)


def test_a_humans_wake_up_joining_a_deep_queued_run_gives_it_a_fresh_chain(cast):
    deep = Run.objects.create(
        organization=cast.org, agent=cast.alex, trigger="created", status=RunStatus.QUEUED, depth=40
    )
    cast.assign(cast.alex)
    deep.refresh_from_db()
    assert (deep.depth, deep.triggers.count()) == (1, 1)


def test_a_run_woken_by_a_run_joining_a_shallower_queued_run_keeps_its_depth(cast):
    queued = Run.objects.create(
        organization=cast.org, agent=cast.alex, trigger="created", status=RunStatus.QUEUED, depth=2
    )
    task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=9))
    queued.refresh_from_db()
    assert (queued.depth, queued.triggers.count()) == (2, 1)


def test_a_released_wake_up_joining_a_deep_queued_run_gives_it_a_fresh_chain(cast, settings):
    settings.RUNTIME_MAX_CHAIN_RUNS = 5
    task = task_for(cast, cast.alex, by_run=a_run(cast, cast.lena, depth=5))
    assert RunTrigger.objects.get(task=task).held == "chain"
    deep = Run.objects.create(
        organization=cast.org, agent=cast.alex, trigger="created", status=RunStatus.QUEUED, depth=5
    )
    assert run_release(organization_id=cast.org.pk, task_id=task.pk) == 1
    deep.refresh_from_db()
    assert deep.depth == 1
    assert RunTrigger.objects.get(task=task).run_id == deep.pk
