"""The audit trail: an event per move, paginated, append-only."""

import pytest

from tasks.models import TaskEvent
from tests.factories import give_tasks
from tests.tasks.conftest import create, post


def test_events_are_the_audit_trail(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    post(
        cast.client(cast.sarah),
        f"/api/tasks/{task['id']}/delegate",
        {"agent_id": "agent-alex", "reasoning": "r"},
    )
    post(cast.client(cast.alex), f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    response = cast.client(cast.sarah).get(f"/api/tasks/{task['id']}/events")
    assert response.status_code == 200
    events = response.json()["results"]
    assert [(e["kind"], e["actor"], e["actor_kind"]) for e in events] == [
        ("created", "agent-sarah", "agent"),
        ("delegated", "agent-sarah", "agent"),
        ("status_changed", "agent-alex", "agent"),
    ]
    assert events[1]["decision"] == "DELEGATE"
    assert (
        events[2]["before"]["status"] == "assigned"
        and events[2]["after"]["status"] == "in_progress"
    )


def test_events_are_paginated_as_the_schema_says_oldest_first(cast):
    sarah = cast.client(cast.sarah)
    task = create(sarah, agent_id="agent-sarah").json()
    post(sarah, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    post(sarah, f"/api/tasks/{task['id']}/status", {"status": "blocked"})
    # The task list's filters are not the event log's: a status filter does not thin it.
    response = sarah.get(f"/api/tasks/{task['id']}/events?limit=2&status=queued")
    assert response.status_code == 200
    page = response.json()
    assert (page["count"], page["previous"]) == (3, None)
    assert [e["kind"] for e in page["results"]] == ["created", "status_changed"]
    rest = sarah.get(page["next"]).json()
    assert [e["after"]["status"] for e in rest["results"]] == ["blocked"]


def test_every_move_writes_an_event_with_its_actor_and_a_consistent_before_after(cast):
    give_tasks(cast.morgan, 5)
    task = create(cast.human).json()
    url = f"/api/tasks/{task['id']}"
    moves = [
        (cast.human, "queue", {"agent_id": "agent-morgan", "reasoning": "only expert"}),
        (cast.human, "assign", {"agent_id": "agent-sarah"}),
        (cast.client(cast.sarah), "escalate", {"reason": "stuck"}),
        (cast.human, "cancel", {"reason": "obsolete"}),
    ]
    for client, move, body in moves:
        response = post(client, f"{url}/{move}", body)
        assert response.status_code == 200, (move, response.content)
    events = cast.human.get(f"{url}/events").json()["results"]
    assert [(e["kind"], e["actor_kind"], e["decision"]) for e in events] == [
        ("created", "user", ""),
        ("queued", "user", "QUEUE"),
        ("assigned", "user", ""),
        ("escalated", "agent", "ESCALATE"),
        ("cancelled", "user", ""),
    ]
    for earlier, later in zip(events, events[1:], strict=False):
        assert later["before"] == earlier["after"], (earlier["kind"], later["kind"])
    assert [e["after"]["status"] for e in events] == [
        "queued",
        "queued",
        "assigned",
        "assigned",
        "cancelled",
    ]
    assert all(e["created_at"] for e in events)
    assert events[1]["wait_time_seconds"] == 720 and events[1]["reasoning"] == "only expert"


def test_task_events_are_append_only(cast):
    from tasks.models import AppendOnlyError

    task = create(cast.human, agent_id="agent-sarah").json()
    event = TaskEvent.objects.get(task_id=task["id"])
    event.message = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
