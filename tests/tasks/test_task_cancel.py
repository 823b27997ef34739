"""Cancel: by the creator or a human; who is told."""

from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


def test_cancel_by_creator_or_human_only(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    url = f"/api/tasks/{task['id']}/cancel"
    assert_error(post(cast.client(cast.alex), url, {}), 409, "invalid_transition", "creator")
    response = post(cast.client(cast.sarah), url, {"reason": "Not needed"})
    assert response.json()["status"] == "cancelled"
    assert_error(
        post(cast.human, url, {}), 409, "invalid_transition", "Cannot transition from cancelled"
    )


def test_a_cancellation_tells_the_holder_the_expert_waited_for_and_the_creator(cast):
    """Rule 8: who was working on the task (its holder), waiting to (the expert it was queued
    for) and the agent that created it are told of its cancellation — an inbox item of kind
    `cancelled`, never the canceller, never asked to act (a managed agent is not woken for it)."""
    from tasks.models import InboxItem
    from tasks.signals import WAKING_KINDS

    held = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    post(cast.human, f"/api/tasks/{held['id']}/cancel", {"reason": "Not needed"})
    told = InboxItem.objects.filter(task_id=held["id"], kind="cancelled")
    assert sorted(told.values_list("agent__handle", flat=True)) == ["agent-alex", "agent-sarah"]
    assert "Not needed" in told.first().message

    give_tasks(cast.alex, cast.alex.workload_capacity)
    waiting = create(cast.human).json()
    queued = post(cast.human, f"/api/tasks/{waiting['id']}/queue", {"agent_id": "agent-alex"})
    assert queued.json()["queued_for"] == "agent-alex"
    post(cast.human, f"/api/tasks/{waiting['id']}/cancel", {})
    told = InboxItem.objects.filter(task_id=waiting["id"], kind="cancelled")
    assert list(told.values_list("agent__handle", flat=True)) == ["agent-alex"]

    own = create(cast.client(cast.sarah), agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{own['id']}/cancel", {})
    assert not InboxItem.objects.filter(task_id=own["id"], kind="cancelled").exists()
    assert "cancelled" not in WAKING_KINDS
