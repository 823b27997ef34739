"""One escalation: the move and the stale sweep choose the same target and leave the same state."""

from datetime import timedelta

import pytest
from django.utils import timezone

from organization.models import TeamRule
from tasks import events
from tasks.models import Task, TaskEvent
from tasks.rules import SYSTEM, Actor
from tasks.services import task_create, task_escalate
from tasks.sweep import sweep_stale_queued
from tests.factories import give_tasks, make_agent, make_org

pytestmark = pytest.mark.django_db


def queued_task(org, *, by, for_, title):
    task = task_create(org=org, actor=SYSTEM, title=title)
    Task.objects.filter(pk=task.pk).update(
        queued_by=by, queued_for=for_, queued_at=timezone.now() - timedelta(hours=5)
    )
    return Task.objects.get(pk=task.pk)


def state(task):
    task.refresh_from_db()
    return (task.status, task.assignee_id, task.queued_for_id, task.delegation_chain)


@pytest.mark.parametrize("boss_is_full", [False, True])
def test_the_move_and_the_sweep_escalate_a_queued_task_alike(boss_is_full):
    org = make_org("alike")
    chief = make_agent(org, "agent-chief")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    if boss_is_full:
        give_tasks(boss, 5)
    else:
        boss.workload_capacity = 10
        boss.save()
    TeamRule.objects.create(organization=org, default_supervisor=chief)
    moved = queued_task(org, by=worker, for_=expert, title="moved")
    swept = queued_task(org, by=worker, for_=expert, title="swept")

    task_escalate(task=moved, actor=SYSTEM)
    assert sweep_stale_queued().escalated == 1

    assert state(moved) == state(swept)
    if boss_is_full:
        assert (swept.status, swept.queued_for) == ("queued", boss)
    else:
        assert (swept.status, swept.assignee) == ("assigned", boss)
    by_move, by_sweep = (TaskEvent.objects.get(task=t, kind="escalated") for t in (moved, swept))
    assert (by_move.recipient, by_move.after) == (by_sweep.recipient, by_sweep.after)
    assert by_move.primary_choice == by_sweep.primary_choice == "agent-boss"


def test_without_anyone_above_both_escalate_to_humans():
    org = make_org("nobody-above")
    worker = make_agent(org, "agent-worker")
    expert = make_agent(org, "agent-expert")
    give_tasks(expert, 5)
    moved = queued_task(org, by=worker, for_=expert, title="moved")
    swept = queued_task(org, by=worker, for_=expert, title="swept")
    task_escalate(task=moved, actor=SYSTEM)
    sweep_stale_queued()
    assert state(moved) == state(swept) == ("escalated", None, None, [])
    assert (
        TaskEvent.objects.get(task=swept, kind="escalated").message
        == "The system escalated the stale task to humans."
    )


def test_a_batch_refuses_an_event_whose_fields_it_would_drop():
    org = make_org("batched")
    alex = make_agent(org, "agent-alex")
    task = task_create(org=org, actor=SYSTEM, title="t")
    event = events.escalation_event(
        task=task, actor=Actor("agent", alex.handle, agent=alex), before={}, target=None,
        verdict=None, notes="would be lost",
    )  # fmt: skip
    with pytest.raises(ValueError, match="Batched events"):
        events._insert_events([event], timezone.now())
