"""Seed 001's DELEGATION DECISION on every routing move, and the cross-team note (issue 8 §6)."""

import pytest

from tasks.models import TaskEvent
from tests.factories import give_tasks, make_agent, make_team
from tests.tasks.conftest import create, post
from tests.tasks.test_tools import call

pytestmark = pytest.mark.django_db

DECISION = {
    "primary_reason": "Morgan: MySQL expert",
    "fallback": "Alex (PostgreSQL, same team)",
    "reasoning": "Only Morgan knows MySQL replication.",
    "notes": "Not urgent.",
}


def last_event(task_id, kind):
    return TaskEvent.objects.filter(task_id=task_id, kind=kind).latest("pk")


def events_shown(cast, task_id):
    response = cast.client(cast.sarah).get(f"/api/tasks/{task_id}/events")
    assert response.status_code == 200, response.content
    body = response.json()
    # A bare list today; a page if the events answer gets paginated (issue 8 §7).
    return body["results"] if isinstance(body, dict) else body


def decision_of(event):
    return {k: getattr(event, k) for k in DECISION}


def a_task_of(cast, agent):
    response = create(cast.client(agent), title="Tune MySQL", agent_id=agent.handle)
    assert response.status_code == 201, response.content
    return response.json()["id"]


# --- /queue and /escalate keep the decision (REST and tools) ---------------------------------


def test_queue_stores_the_delegation_decision_and_the_wait_time(cast):
    give_tasks(cast.morgan, 5)
    task = a_task_of(cast, cast.sarah)
    response = post(
        cast.client(cast.sarah),
        f"/api/tasks/{task}/queue",
        {"agent_id": "agent-morgan", **DECISION, "wait_time_seconds": 1800},
    )
    assert response.status_code == 200, response.content
    event = last_event(task, "queued")
    assert (event.decision, event.primary_choice) == ("QUEUE", "agent-morgan")
    assert decision_of(event) == DECISION
    assert event.wait_time_seconds == 1800
    shown = events_shown(cast, task)
    queued = next(e for e in shown if e["kind"] == "queued")
    assert {k: queued[k] for k in DECISION} == DECISION
    assert queued["wait_time_seconds"] == 1800


def test_queue_without_a_wait_time_keeps_the_services_estimate(cast):
    give_tasks(cast.morgan, 5)
    task = a_task_of(cast, cast.sarah)
    post(cast.client(cast.sarah), f"/api/tasks/{task}/queue", {"agent_id": "agent-morgan"})
    assert last_event(task, "queued").wait_time_seconds == 720  # 3600 s / capacity 5


def test_queue_refuses_a_negative_wait_time(cast):
    give_tasks(cast.morgan, 5)
    task = a_task_of(cast, cast.sarah)
    response = post(
        cast.client(cast.sarah),
        f"/api/tasks/{task}/queue",
        {"agent_id": "agent-morgan", "wait_time_seconds": -5},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_escalate_stores_the_delegation_decision(cast):
    task = a_task_of(cast, cast.sarah)
    response = post(cast.client(cast.sarah), f"/api/tasks/{task}/escalate", DECISION)
    assert response.status_code == 200, response.content
    event = last_event(task, "escalated")
    assert (event.decision, event.primary_choice) == ("ESCALATE", "agent-boss")
    assert decision_of(event) == DECISION


def test_escalate_keeps_reason_as_the_reasoning(cast):
    task = a_task_of(cast, cast.sarah)
    post(cast.client(cast.sarah), f"/api/tasks/{task}/escalate", {"reason": "too slow"})
    assert last_event(task, "escalated").reasoning == "too slow"


def test_queue_and_escalate_tools_store_the_decision(cast):
    give_tasks(cast.morgan, 5)
    sarah = cast.client(cast.sarah)
    task = a_task_of(cast, cast.sarah)
    queued = call(
        sarah,
        "queue_task",
        task_id=task,
        agent_id="agent-morgan",
        **DECISION,
        wait_time_seconds=900,
    )
    assert queued.status_code == 200, queued.content
    event = last_event(task, "queued")
    assert decision_of(event) == DECISION and event.wait_time_seconds == 900

    escalated = call(sarah, "escalate_task", task_id=task, **DECISION)
    assert escalated.status_code == 200, escalated.content
    assert decision_of(last_event(task, "escalated")) == DECISION


# --- cross-team delegation leaves a note -------------------------------------------------------


def test_a_cross_team_delegation_event_carries_cross_team_and_the_note(cast):
    task = a_task_of(cast, cast.sarah)
    response = post(
        cast.client(cast.sarah),
        f"/api/tasks/{task}/delegate",
        {"agent_id": "agent-morgan", "reasoning": "MySQL"},
    )
    assert response.status_code == 200, response.content
    event = last_event(task, "delegated")
    assert event.cross_team is True
    assert event.coordination_note == (
        "Cross-team delegation: agent-sarah (Development) to agent-morgan (Data); "
        "note the coordination overhead."
    )
    shown = events_shown(cast, task)
    delegated = next(e for e in shown if e["kind"] == "delegated")
    assert delegated["cross_team"] is True
    assert delegated["coordination_note"] == event.coordination_note


def test_a_same_team_delegation_is_not_cross_team(cast):
    task = a_task_of(cast, cast.sarah)
    post(cast.client(cast.sarah), f"/api/tasks/{task}/delegate", {"agent_id": "agent-alex"})
    event = last_event(task, "delegated")
    assert (event.cross_team, event.coordination_note) == (False, "")
    shown = events_shown(cast, task)
    assert all(e["cross_team"] is False for e in shown)


def test_queueing_for_another_teams_expert_is_cross_team_too(cast):
    give_tasks(cast.morgan, 5)
    task = a_task_of(cast, cast.sarah)
    post(cast.client(cast.sarah), f"/api/tasks/{task}/queue", {"agent_id": "agent-morgan"})
    event = last_event(task, "queued")
    assert event.cross_team is True
    assert "agent-morgan (Data)" in event.coordination_note


def test_the_delegate_tool_records_cross_team(cast):
    task = a_task_of(cast, cast.sarah)
    response = call(cast.client(cast.sarah), "delegate_task", task_id=task, agent_id="agent-morgan")
    assert response.status_code == 200, response.content
    assert last_event(task, "delegated").cross_team is True


def test_the_admin_shows_the_coordination_note_under_the_task(cast, admin_client):
    task = a_task_of(cast, cast.sarah)
    post(cast.client(cast.sarah), f"/api/tasks/{task}/delegate", {"agent_id": "agent-morgan"})
    page = admin_client.get(f"/admin/tasks/task/{task}/change/")
    assert page.status_code == 200
    assert "Cross-team delegation: agent-sarah (Development) to agent-morgan (Data)" in (
        page.content.decode()
    )


# --- down the reporting line is not cross-team ----------------------------------------------


@pytest.fixture
def line(cast):
    """The boss leads from a team of their own; Morgan (Data) reports to them, Riley (Ops) to
    Morgan."""
    cast.boss.team = make_team(cast.org, "Leadership")
    cast.boss.expertise = ["Planning"]
    cast.boss.save()
    cast.riley = make_agent(
        cast.org,
        "agent-riley",
        team=make_team(cast.org, "Ops"),
        senior=cast.morgan,
        expertise=["MySQL"],
    )
    return cast


@pytest.mark.parametrize("report", ["agent-morgan", "agent-riley"])
def test_a_managers_delegation_down_its_reporting_line_is_not_cross_team(line, report):
    task = a_task_of(line, line.boss)
    response = post(line.client(line.boss), f"/api/tasks/{task}/delegate", {"agent_id": report})
    assert response.status_code == 200, response.content
    event = last_event(task, "delegated")
    assert (event.cross_team, event.coordination_note) == (False, "")
    shown = line.client(line.boss).get(f"/api/tasks/{task}/events").json()["results"]
    assert all(e["cross_team"] is False for e in shown)


def test_a_delegation_up_or_across_the_line_stays_cross_team(line):
    task = a_task_of(line, line.riley)
    post(line.client(line.riley), f"/api/tasks/{task}/delegate", {"agent_id": "agent-alex"})
    assert last_event(task, "delegated").cross_team is True


def test_the_recommendation_for_a_manager_ranks_its_reports_as_its_team(line):
    response = line.client(line.boss).get("/api/delegation/recommendation?expertise=MySQL")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [(c["id"], c["tier"]) for c in body["candidates"][:2]] == [
        ("agent-morgan", 1),
        ("agent-riley", 1),
    ]
    assert body["primary_choice"]["reason"].endswith(
        "MySQL expertise, reports to you, no coordination overhead"
    )
    assert body["cross_team"] is False
    assert "Cross-team" not in body["decision_text"]
    assert "Notes:" not in body["decision_text"]
    assert "other team" not in body["decision_text"]


def test_the_task_page_tells_no_coordination_for_a_delegation_to_a_report(line, admin_client):
    task = a_task_of(line, line.boss)
    post(line.client(line.boss), f"/api/tasks/{task}/delegate", {"agent_id": "agent-morgan"})
    page = admin_client.get(f"/admin/tasks/task/{task}/change/").content.decode()
    assert "delegated the task to agent-morgan" in page
    assert "Cross-team" not in page and "coordination overhead" not in page


@pytest.mark.parametrize("door", ["rest", "tool"])
@pytest.mark.parametrize("move", ["delegate", "queue", "escalate"])
def test_null_decision_fields_are_not_given_at_both_doors(cast, door, move):
    # A strict-mode tool client sends null for each field it leaves out; REST means the same.
    if move == "queue":
        give_tasks(cast.morgan, 5)
    task = create(cast.human, agent_id="agent-sarah").json()
    body = {name: None for name in DECISION}
    if move == "escalate":
        body["reason"] = None
    else:
        body["agent_id"] = "agent-morgan"
    sarah = cast.client(cast.sarah)
    if door == "rest":
        response = post(sarah, f"/api/tasks/{task['id']}/{move}", body)
    else:
        response = call(sarah, f"{move}_task", task_id=task["id"], **body)
    assert response.status_code == 200, response.content
    event = last_event(
        task["id"], {"delegate": "delegated", "queue": "queued"}.get(move, "escalated")
    )
    assert [getattr(event, name) for name in DECISION] == ["", "", "", ""]
