"""Queue: only for a busy expert, with its estimated wait; the queue refills as room frees."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tasks.models import Task, TaskEvent
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


def test_queue_only_for_a_busy_expert(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    sarah = cast.client(cast.sarah)
    url = f"/api/tasks/{task['id']}/queue"
    assert_error(post(sarah, url, {"agent_id": "agent-morgan"}), 409, "expert_available", "assign")
    cast.morgan.is_paused = True
    cast.morgan.save()
    assert_error(post(sarah, url, {"agent_id": "agent-morgan"}), 409, "agent_offline", "escalate")
    cast.morgan.is_paused = False
    cast.morgan.save()
    give_tasks(cast.morgan, 5)
    response = post(sarah, url, {"agent_id": "agent-morgan", "reasoning": "Only MySQL expert"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["assignee"], body["queued_for"]) == (
        "queued",
        None,
        "agent-morgan",
    )
    # No completion history: the stated default (1 h) over capacity 5, first in line.
    assert body["estimated_wait_seconds"] == 720
    event = TaskEvent.objects.filter(task_id=task["id"], kind="queued").get()
    assert (event.decision, event.wait_time_seconds) == ("QUEUE", 720)


def test_the_estimated_wait_comes_from_the_experts_measured_completion_times(cast):
    now = timezone.now()
    for minutes in (5, 15):  # a mean of 10 minutes per task
        done = give_tasks(cast.morgan, 1, status="completed")[0]
        Task.objects.filter(pk=done.pk).update(
            assigned_at=now - timedelta(minutes=minutes), finished_at=now
        )
    give_tasks(cast.morgan, 5)
    sarah = cast.client(cast.sarah)
    waits = []
    for _ in range(2):
        task = create(cast.human, agent_id="agent-sarah").json()
        response = post(sarah, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"})
        assert response.status_code == 200, response.content
        waits.append(response.json()["estimated_wait_seconds"])
    # 600 s over capacity 5 per place in line: first 120 s, second 240 s.
    assert waits == [120, 240]
    listed = cast.human.get("/api/tasks?queued_for=agent-morgan").json()["results"]
    assert sorted(t["estimated_wait_seconds"] for t in listed) == [120, 240]


def test_each_expert_is_estimated_from_its_own_last_completions_whatever_the_others_did(cast):
    """Estimated together (a list), a busy colleague's 1,000 recent completions do not push
    Morgan's own history out of the sample: the list and the move agree."""
    now = timezone.now()
    history = [
        Task(
            organization=cast.org,
            title="done",
            status="completed",
            assignee=agent,
            delegation_chain=[agent.handle],
            finished_at=finished,
            assigned_at=finished - timedelta(minutes=minutes),
        )
        for agent, count, minutes, finished in (
            (cast.morgan, 2, 10, now - timedelta(days=1)),
            (cast.alex, 1000, 1, now - timedelta(hours=1)),
        )
        for _ in range(count)
    ]
    for task in history:
        task.keep_urgency_rank()
    Task.objects.bulk_create(history)
    give_tasks(cast.morgan, 5)
    give_tasks(cast.alex, 5)
    mine = create(cast.human, agent_id="agent-sarah").json()
    moved = post(
        cast.client(cast.sarah), f"/api/tasks/{mine['id']}/queue", {"agent_id": "agent-morgan"}
    )
    assert moved.json()["estimated_wait_seconds"] == 120  # 600 s over capacity 5, first in line
    other = create(cast.human).json()
    assert (
        post(cast.human, f"/api/tasks/{other['id']}/queue", {"agent_id": "agent-alex"}).status_code
        == 200
    )
    listed = cast.human.get("/api/tasks?status=queued").json()["results"]
    waits = {t["queued_for"]: t["estimated_wait_seconds"] for t in listed}
    assert waits == {"agent-morgan": 120, "agent-alex": 12}


def test_when_the_expert_drops_below_capacity_the_most_urgent_oldest_queued_task_is_assigned(cast):
    held = give_tasks(cast.morgan, 5)
    low = create(cast.human, urgency="low").json()
    first_high = create(cast.human, urgency="high").json()
    second_high = create(cast.human, urgency="high").json()
    for task in (low, first_high, second_high):
        response = post(cast.human, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"})
        assert response.status_code == 200, response.content
    held[0].status = "in_progress"
    held[0].save()
    response = post(
        cast.client(cast.morgan), f"/api/tasks/{held[0].pk}/status", {"status": "completed"}
    )
    assert response.status_code == 200
    states = {
        t.pk: (t.status, t.assignee_id)
        for t in Task.objects.filter(pk__in=[low["id"], first_high["id"], second_high["id"]])
    }
    assert states[first_high["id"]] == ("assigned", cast.morgan.pk)
    assert states[second_high["id"]] == ("queued", None)
    assert states[low["id"]] == ("queued", None)
    auto = TaskEvent.objects.get(task_id=first_high["id"], kind="auto_assigned")
    assert auto.actor_kind == "system"
    assert cast.morgan.inbox_items.filter(task_id=first_high["id"], kind="auto_assigned").exists()


@pytest.mark.parametrize("how", ["cancel", "reassign", "failed", "delegate", "escalate"])
def test_other_ways_of_dropping_below_capacity_also_pull_from_the_queue(cast, how):
    held = give_tasks(cast.morgan, 5)
    waiting = create(cast.human).json()
    post(cast.human, f"/api/tasks/{waiting['id']}/queue", {"agent_id": "agent-morgan"})
    if how == "cancel":
        response = post(cast.human, f"/api/tasks/{held[0].pk}/cancel", {"reason": "obsolete"})
    elif how == "reassign":
        response = post(cast.human, f"/api/tasks/{held[0].pk}/assign", {"agent_id": "agent-alex"})
    elif how == "delegate":
        response = post(
            cast.client(cast.morgan),
            f"/api/tasks/{held[0].pk}/delegate",
            {"agent_id": "agent-alex"},
        )
    elif how == "escalate":
        response = post(cast.client(cast.morgan), f"/api/tasks/{held[0].pk}/escalate", {})
        assert response.json()["assignee"] == "agent-boss"
    else:
        Task.objects.filter(pk=held[0].pk).update(status="in_progress")
        response = post(cast.human, f"/api/tasks/{held[0].pk}/status", {"status": "failed"})
    assert response.status_code == 200, response.content
    assert Task.objects.get(pk=waiting["id"]).assignee_id == cast.morgan.pk
