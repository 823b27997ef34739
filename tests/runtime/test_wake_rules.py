"""A managed agent wakes only when work reaches it (docs/runtime.md, "What wakes a managed
agent"): not for a comment on a task it only waits for, not by the sweep's timer for what it
received while it was external, not when its capacity or a budget changes with nothing waiting
for it; and out of budget it is held as a paused agent is, until the budget makes room."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from costs.budgets import blocking_budget, budget_set
from costs.models import UsageRecord
from organization.models import Agent
from organization.services import agent_set_paused
from runtime import services as runtime_services
from runtime.lease import HELD
from runtime.models import Run, RunStatus, RunTrigger
from runtime.runner import run_agent
from tasks import services
from tasks.models import InboxItem
from tests.factories import give_tasks
from tests.organization.test_admin import change_url, form_of
from tests.runtime.conftest import drain, runs_of, triggers_of

pytestmark = pytest.mark.django_db(transaction=True)


def seen_and_left(agent):
    """Its run saw what it holds and ended, leaving it assigned (a question asked in a
    comment, say)."""
    Run.objects.filter(agent=agent).update(status=RunStatus.COMPLETED, finished_at=timezone.now())


def edit_in_admin(client, agent, **changes):
    url = change_url(agent)
    data = form_of(client, url, "agent_form")
    data.update({name: str(value) for name, value in changes.items()})
    response = client.post(url, data)
    assert response.status_code == 302, response.context["errors"]


def hours_ago(hours: int):
    return timezone.now() - timedelta(hours=hours)


# --- a comment ---------------------------------------------------------------------------------


def test_a_comment_on_a_task_queued_for_a_managed_expert_tells_it_without_waking_it(cast):
    held = give_tasks(cast.alex, 5)  # Alex is full: the task waits for him
    task = services.task_create(org=cast.org, actor=cast.by_human, title="Tune the index")
    task = services.task_queue(task=task, actor=cast.by_human, to=cast.alex)
    services.task_comment(task=task, actor=cast.by_human, body="Any news?")
    # Told (he reads it when the task is his), not woken: he does not hold the task.
    assert InboxItem.objects.filter(agent=cast.alex, task=task, kind="comment").count() == 1
    assert not Run.objects.filter(agent=cast.alex).exists()
    assert not RunTrigger.objects.filter(agent=cast.alex).exists()
    # The queue's refill gives him the task: that wakes him.
    services.task_set_status(task=held[0], actor=cast.actor(cast.alex), status="in_progress")
    services.task_set_status(
        task=held[0], actor=cast.actor(cast.alex), status="completed", result="done"
    )
    assert runs_of(cast.alex) == [("queued", "auto_assigned", task.pk)]


def test_a_comment_still_wakes_the_expert_it_waits_for_when_it_passed_the_task_on(cast):
    """Lena created the task for Alex, who escalated it back to her: full, it waits for her. As
    its creator she is one a comment wakes; that it now waits for her changes nothing."""
    task = cast.assign(cast.alex, by=cast.actor(cast.lena))
    give_tasks(cast.lena, 5)
    task = services.task_escalate(task=task, actor=cast.actor(cast.alex))
    assert (task.status, task.queued_for) == ("queued", cast.lena)
    RunTrigger.objects.all().delete()
    services.task_comment(task=task, actor=cast.by_human, body="Lena, this is urgent")
    assert RunTrigger.objects.filter(agent=cast.lena, trigger="comment", task=task).exists()


# --- the sweep's timer -------------------------------------------------------------------------


def test_the_sweep_does_not_wake_an_agent_made_managed_for_what_it_received_while_external(
    cast, admin_client
):
    task = cast.assign(cast.morgan)
    services.task_set_status(task=task, actor=cast.actor(cast.morgan), status="in_progress")
    edit_in_admin(admin_client, cast.morgan, runtime="managed")
    assert not Run.objects.filter(agent=cast.morgan).exists()  # in progress: nothing to start
    # The task reached Morgan four hours ago, while external; the switch was three hours ago.
    InboxItem.objects.filter(agent=cast.morgan).update(created_at=hours_ago(4))
    Agent.history.filter(id=cast.morgan.pk).update(
        history_date=F("history_date") - timedelta(hours=3)
    )
    assert runtime_services.sweep_runs() == {"resent": [], "woken": []}
    assert not Run.objects.filter(agent=cast.morgan).exists()
    # A wake-up lost since the switch is sent again.
    services.task_comment(task=task, actor=cast.by_human, body="Any news?")
    RunTrigger.objects.filter(agent=cast.morgan).delete()
    Run.objects.filter(agent=cast.morgan).delete()
    InboxItem.objects.filter(agent=cast.morgan, kind="comment").update(created_at=hours_ago(1))
    assert runtime_services.sweep_runs() == {"resent": [], "woken": [cast.morgan.pk]}
    assert runs_of(cast.morgan) == [("queued", "comment", task.pk)]


def test_the_sweep_counts_from_the_last_switch_to_managed(cast, admin_client):
    """Managed, external, managed again: only what reached the agent since the last switch was
    asked for a run; what reached it in an earlier managed time was answered or dropped then."""
    tasks = []
    for title in ("first managed time", "external time", "managed again"):
        task = cast.assign(cast.morgan, title)
        services.task_set_status(task=task, actor=cast.actor(cast.morgan), status="in_progress")
        tasks.append(task)
    for runtime in ("managed", "external", "managed"):
        edit_in_admin(admin_client, cast.morgan, runtime=runtime)
    rows = list(Agent.history.filter(id=cast.morgan.pk).order_by("history_id"))
    assert [row.runtime for row in rows[-3:]] == ["managed", "external", "managed"]
    for row, hours in zip(rows[-3:], (10, 6, 3), strict=True):
        Agent.history.filter(history_id=row.history_id).update(history_date=hours_ago(hours))
    Agent.history.filter(id=cast.morgan.pk, history_id__lt=rows[-3].history_id).update(
        history_date=hours_ago(12)
    )
    for task, hours in zip(tasks, (8, 5, 1), strict=True):
        InboxItem.objects.filter(agent=cast.morgan, task=task).update(created_at=hours_ago(hours))
    RunTrigger.objects.filter(agent=cast.morgan).delete()
    Run.objects.filter(agent=cast.morgan).delete()
    assert runtime_services.sweep_runs() == {"resent": [], "woken": [cast.morgan.pk]}
    assert [task_id for _, _, task_id in runs_of(cast.morgan)] == [tasks[2].pk]


# --- capacity, pause and budgets ---------------------------------------------------------------


def test_giving_a_managed_agent_more_capacity_wakes_it_only_for_work_no_run_saw(cast, admin_client):
    seen = cast.assign(cast.alex, "s")
    seen_and_left(cast.alex)
    edit_in_admin(admin_client, cast.alex, workload_capacity=9)
    assert runs_of(cast.alex) == [("completed", "created", seen.pk)]
    # A task whose wake-up never ran (its worker died in between) is work waiting.
    lost = cast.assign(cast.alex, "l")
    Run.objects.filter(agent=cast.alex, status="queued").delete()
    edit_in_admin(admin_client, cast.alex, workload_capacity=10)
    (run,) = Run.objects.filter(agent=cast.alex, status="queued")
    assert triggers_of(run) == [("resumed", lost.pk)]


def test_resuming_a_managed_agent_whose_runs_saw_all_it_holds_starts_no_run(cast):
    cast.assign(cast.alex)
    seen_and_left(cast.alex)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=True)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    assert not Run.objects.filter(agent=cast.alex, status="queued").exists()


def test_raising_a_budget_wakes_only_the_agents_that_waited_for_it(cast):
    budget_set(caller=cast.human, scope="organization", limit_usd="10")
    cast.assign(cast.alex, "a")
    seen_and_left(cast.alex)
    budget_set(caller=cast.human, scope="agent", agent="agent-sarah", limit_usd="0")
    waited = cast.assign(cast.sarah, "s")
    assert not Run.objects.filter(agent=cast.sarah).exists()
    budget_set(caller=cast.human, scope="agent", agent="agent-sarah", limit_usd="5")
    assert runs_of(cast.sarah) == [("queued", "created", waited.pk)]
    assert not Run.objects.filter(agent=cast.alex, status="queued").exists()
    budget_set(caller=cast.human, scope="organization", limit_usd="20")
    assert not Run.objects.filter(agent=cast.alex, status="queued").exists()


# --- out of budget: held as a paused agent -----------------------------------------------------


def test_a_run_ending_out_of_budget_starts_no_follow_up_until_the_budget_makes_room(cast):
    first = cast.assign(cast.alex, "1")
    (run,) = Run.objects.filter(agent=cast.alex)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, lease_token="tok", heartbeat_at=timezone.now()
    )
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="0")
    second = cast.assign(cast.alex, "2")
    runtime_services.run_finish(run=run, token="tok", status=RunStatus.COMPLETED)
    assert runs_of(cast.alex) == [("completed", "created", first.pk)]
    assert list(
        RunTrigger.objects.filter(agent=cast.alex, run__isnull=True).values_list(
            "trigger", "task_id"
        )
    ) == [("created", second.pk)]
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="5")
    follow_up = Run.objects.get(agent=cast.alex, status="queued")
    assert (follow_up.trigger, follow_up.task_id) == ("created", second.pk)
    assert triggers_of(follow_up) == [("created", second.pk)]


def test_a_queued_run_of_an_agent_out_of_budget_is_held_until_the_budget_makes_room(cast, offline):
    task = cast.assign(cast.alex)
    (run,) = Run.objects.filter(agent=cast.alex)
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="0")
    assert blocking_budget(cast.alex) is not None
    assert run_agent(run.pk) == HELD
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, run.attempts, task.status) == ("queued", 0, "assigned")
    assert not UsageRecord.objects.filter(run=run).exists()
    # The stale-run sweep leaves it to the budget's room, as a paused agent's run to its resumption.
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now() - timedelta(hours=1))
    assert runtime_services.sweep_runs()["resent"] == []
    budget_set(caller=cast.human, scope="agent", agent="agent-alex", limit_usd="5")
    assert drain() == [run.pk]
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, task.status) == ("completed", "completed")
