"""Escalate: to the senior, then the default supervisor, then humans; full or offline seniors."""

from tasks.models import TaskEvent
from tests.factories import give_tasks, make_agent
from tests.tasks.conftest import create, post


def test_escalation_goes_to_the_senior(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {"reason": "Out of my depth"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-boss"
    event = TaskEvent.objects.get(task_id=task["id"], kind="escalated")
    assert (event.decision, event.reasoning, event.primary_choice) == (
        "ESCALATE",
        "Out of my depth",
        "agent-boss",
    )


def test_escalation_without_senior_goes_to_the_default_supervisor_then_humans(cast):
    chief = make_agent(cast.org, "agent-chief", hierarchy_role="supervisor")
    cast.rule.default_supervisor = chief
    cast.rule.save()
    cast.sarah.senior = None
    cast.sarah.save()
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    assert response.json()["assignee"] == "agent-chief"
    # The default supervisor itself has nobody above it: humans.
    response = post(
        cast.client(chief), f"/api/tasks/{task['id']}/escalate", {"reason": "needs a human"}
    )
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["assignee"]) == ("escalated", None)
    # Humans pick it up again.
    response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert response.json()["status"] == "assigned"


def test_escalation_to_a_full_senior_queues_for_them(cast):
    give_tasks(cast.boss, 5)
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["queued_for"]) == ("queued", "agent-boss")
    assert "queued for them" in TaskEvent.objects.get(task_id=task["id"], kind="escalated").message


def test_an_offline_senior_is_skipped(cast):
    cast.boss.is_paused = True
    cast.boss.save()
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/escalate", {})
    assert response.json()["status"] == "escalated"
