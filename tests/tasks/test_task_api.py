"""POST/GET /api/tasks and the moves: assign, claim, delegate, queue, escalate, status, cancel."""

from datetime import timedelta

import pytest
from django.utils import timezone

from infrastructure.errors import Forbidden
from tasks.models import Task, TaskEvent
from tasks.rules import Actor
from tasks.services import task_delegate
from tests.factories import give_tasks, make_agent, make_org
from tests.tasks.conftest import assert_error, create, post

HUMAN = Actor("user", "user:tester")


def test_an_agent_creates_a_task_assigned_to_a_colleague(cast):
    response = create(
        cast.client(cast.sarah),
        title="Fix the login form",
        description="It breaks on Safari",
        required_expertise="React",
        urgency="high",
        deadline="2030-01-01T12:00:00Z",
        agent_id="agent-alex",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("title", "urgency", "status", "assignee", "created_by_agent")} == {
        "title": "Fix the login form",
        "urgency": "high",
        "status": "assigned",
        "assignee": "agent-alex",
        "created_by_agent": "agent-sarah",
    }
    assert body["delegation_chain"] == ["agent-sarah", "agent-alex"]
    assert body["queued_for"] is None
    assert body["estimated_wait_seconds"] is None
    assert body["deadline"].startswith("2030-01-01T12:00:00")
    assert set(body) >= {"id", "description", "required_expertise", "created_at", "updated_at"}


def test_without_agent_id_the_task_is_queued_unassigned(cast):
    response = create(cast.human, title="Triage")
    assert response.status_code == 201
    assert response.json()["status"] == "queued"
    assert response.json()["assignee"] is None
    assert response.json()["created_by_agent"] is None


def test_bad_input_is_400(cast):
    assert_error(create(cast.human, title=""), 400, "invalid")
    assert_error(create(cast.human, urgency="whenever"), 400, "invalid", "urgency")
    assert_error(create(cast.human, deadline="tomorrow"), 400, "invalid", "deadline")


def test_unknown_or_foreign_agent_is_404(cast):
    assert_error(create(cast.human, agent_id="agent-nobody"), 404, "agent_not_found")
    make_agent(make_org("elsewhere"), "agent-foreign")
    assert_error(create(cast.human, agent_id="agent-foreign"), 404, "agent_not_found")


def test_a_body_naming_another_agent_as_caller_is_403(cast):
    response = create(cast.client(cast.sarah), agentId="agent-alex")
    assert_error(response, 403, "identity_mismatch")


def test_capacity_is_final(cast):
    give_tasks(cast.alex, 5)
    response = create(cast.human, agent_id="agent-alex")
    assert_error(response, 409, "capacity_exceeded", "5/5")


@pytest.mark.parametrize(
    "status, counts",
    [
        ("assigned", True),
        ("in_progress", True),
        ("blocked", True),
        ("completed", False),
        ("failed", False),
        ("cancelled", False),
    ],
)
def test_workload_counts_assigned_in_progress_and_blocked_tasks_only(cast, status, counts):
    give_tasks(cast.alex, 4)
    give_tasks(cast.alex, 3, status=status)
    response = create(cast.human, agent_id="agent-alex")
    if counts:
        assert_error(response, 409, "capacity_exceeded", "7/5")
    else:
        assert response.status_code == 201, response.content
        assert response.json()["assignee"] == "agent-alex"


def test_an_offline_agent_receives_nothing(cast):
    cast.alex.is_paused = True
    cast.alex.save()
    assert_error(create(cast.human, agent_id="agent-alex"), 409, "agent_offline")


def test_the_assignee_moves_its_task_through_the_lifecycle(cast):
    task = create(cast.human, agent_id="agent-alex").json()
    alex = cast.client(cast.alex)
    url = f"/api/tasks/{task['id']}/status"
    for status in ("in_progress", "blocked", "in_progress", "completed"):
        response = post(alex, url, {"status": status, "note": "ok"})
        assert response.status_code == 200, response.content
        assert response.json()["status"] == status
    assert_error(
        post(alex, url, {"status": "in_progress"}),
        409,
        "invalid_transition",
        "Cannot transition from completed to in_progress",
    )


@pytest.mark.parametrize(
    "start, wanted",
    [
        ("queued", "completed"),
        ("assigned", "completed"),
        ("assigned", "blocked"),
        ("in_progress", "assigned"),
        ("completed", "failed"),
        ("blocked", "completed"),
        ("assigned", "failed"),
        ("blocked", "assigned"),
        ("queued", "in_progress"),
        ("failed", "in_progress"),
    ],
)
def test_disallowed_transitions_are_409(cast, start, wanted):
    task = Task.objects.create(
        organization=cast.org,
        title="t",
        status=start,
        assignee=None if start == "queued" else cast.alex,
    )
    response = post(cast.human, f"/api/tasks/{task.pk}/status", {"status": wanted})
    assert_error(response, 409, "invalid_transition", f"Cannot transition from {start} to {wanted}")


def test_an_agent_cannot_move_someone_elses_task(cast):
    task = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/status", {"status": "in_progress"}
    )
    assert_error(response, 409, "invalid_transition", "only the task's assignee")
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-morgan"}
    )
    assert_error(response, 409, "invalid_transition", "only the task's assignee")


@pytest.mark.parametrize("final", ["completed", "failed", "cancelled"])
def test_reassigning_a_finished_task_is_409(cast, final):
    task = Task.objects.create(organization=cast.org, title="t", status=final, assignee=cast.alex)
    response = post(cast.human, f"/api/tasks/{task.pk}/assign", {"agent_id": "agent-sarah"})
    assert_error(response, 409, "invalid_transition", f"Cannot transition from {final} to assigned")


def test_an_agent_claims_a_task_queued_for_it(cast):
    task = create(cast.human).json()
    Task.objects.filter(pk=task["id"]).update(queued_for=cast.alex)
    response = post(cast.client(cast.alex), f"/api/tasks/{task['id']}/assign", {})
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"
    assert TaskEvent.objects.filter(task_id=task["id"]).last().kind == "claimed"


@pytest.mark.parametrize("body", [{}, {"agent_id": "agent-sarah"}])
def test_the_agent_that_queued_a_task_for_a_busy_expert_may_take_it_back(cast, body):
    # Sarah created it and queued it for Morgan (full); she may hand it to anyone (assign),
    # so she may also take it herself rather than wait. A delegator that neither created nor
    # queued it may still not take a task from the expert's queue.
    give_tasks(cast.morgan, 5)
    sarah = cast.client(cast.sarah)
    task = create(sarah).json()
    assert (
        post(sarah, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"}).status_code
        == 200
    )
    response = post(sarah, f"/api/tasks/{task['id']}/assign", body)
    assert response.status_code == 200, response.content
    assert (response.json()["assignee"], response.json()["queued_for"]) == ("agent-sarah", None)
    assert TaskEvent.objects.filter(task_id=task["id"]).last().kind == "claimed"

    # Boss creates one for Sarah, Sarah passes it to Alex, Alex queues it for Morgan: Alex (who
    # queued it) may take it back; Sarah, who only passed it on, may not take it from the queue.
    other = create(cast.client(cast.boss), agent_id="agent-sarah").json()
    post(sarah, f"/api/tasks/{other['id']}/assign", {"agent_id": "agent-alex"})
    alex = cast.client(cast.alex)
    assert (
        post(alex, f"/api/tasks/{other['id']}/queue", {"agent_id": "agent-morgan"}).status_code
        == 200
    )
    assert_error(
        post(sarah, f"/api/tasks/{other['id']}/assign", {}),
        409,
        "invalid_transition",
        "can be claimed",
    )
    response = post(alex, f"/api/tasks/{other['id']}/assign", body and {"agent_id": "agent-alex"})
    assert response.status_code == 200, response.content
    assert response.json()["assignee"] == "agent-alex"


def test_an_agent_cannot_claim_a_task_it_cannot_see(cast):
    task = create(cast.human).json()
    assert_error(
        post(cast.client(cast.alex), f"/api/tasks/{task['id']}/assign", {}), 404, "task_not_found"
    )


def test_delegation_stores_the_decision_and_extends_the_chain(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah),
        f"/api/tasks/{task['id']}/delegate",
        {
            "agent_id": "agent-alex",
            "primary_reason": "PostgreSQL expertise, same team, 0/5 tasks",
            "fallback": "agent-morgan (cross-team)",
            "reasoning": "Exact match, low workload.",
            "notes": "Straightforward.",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["delegation_chain"] == ["agent-sarah", "agent-alex"]
    event = TaskEvent.objects.filter(task_id=task["id"], kind="delegated").get()
    assert (event.decision, event.primary_choice, event.fallback, event.actor_label) == (
        "DELEGATE",
        "agent-alex",
        "agent-morgan (cross-team)",
        "agent-sarah",
    )
    assert event.before["assignee"] == "agent-sarah" and event.after["assignee"] == "agent-alex"


def test_delegating_back_is_a_loop_naming_who_delegated_it(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    response = post(
        cast.client(cast.alex), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "delegation_loop", "delegated to you by agent-sarah")


def delegate_along(cast, task, hops):
    """Each (agent, handle): that agent delegates the task to the handle, successfully."""
    for agent, to in hops:
        response = post(cast.client(agent), f"/api/tasks/{task['id']}/delegate", {"agent_id": to})
        assert response.status_code == 200, response.content


def test_a_longer_loop_is_caught_too(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    hops = [(cast.sarah, "agent-alex"), (cast.alex, "agent-morgan"), (cast.morgan, "agent-boss")]
    delegate_along(cast, task, hops)
    response = post(
        cast.client(cast.boss), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "delegation_loop", "delegated to you by agent-morgan")


def test_self_delegation_is_409(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    assert_error(response, 409, "self_delegation")


def test_a_chain_longer_than_the_maximum_depth_is_409(cast):
    cast.rule.max_delegation_depth = 3
    cast.rule.save()
    task = create(cast.human, agent_id="agent-sarah").json()
    delegate_along(cast, task, [(cast.sarah, "agent-alex"), (cast.alex, "agent-morgan")])
    response = post(
        cast.client(cast.morgan), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-boss"}
    )
    assert_error(response, 409, "delegation_too_deep", "maximum delegation depth of 3")


def test_humans_delegate_through_assign_not_delegate(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    response = post(cast.human, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    assert_error(response, 403, "agent_required")
    # The rule is the service's, so every door (admin, MCP, …) gets it, not only REST.
    with pytest.raises(Forbidden) as refused:
        task_delegate(task=Task.objects.get(pk=task["id"]), actor=HUMAN, to=cast.alex)
    assert refused.value.code == "agent_required"
    assert Task.objects.get(pk=task["id"]).assignee == cast.sarah


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


def test_an_agent_sees_only_its_own_tasks(cast):
    mine = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    passed = create(cast.human, agent_id="agent-morgan").json()
    post(
        cast.client(cast.morgan), f"/api/tasks/{passed['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    hidden = create(cast.human, agent_id="agent-boss").json()
    sarah = cast.client(cast.sarah)
    listed = {t["id"] for t in sarah.get("/api/tasks").json()["results"]}
    assert listed == {mine["id"], passed["id"]}
    assert_error(sarah.get(f"/api/tasks/{hidden['id']}"), 404, "task_not_found")
    assert_error(sarah.get(f"/api/tasks/{hidden['id']}/events"), 404, "task_not_found")
    assert_error(sarah.get("/api/tasks/not-a-number"), 404, "task_not_found")
    assert len(cast.human.get("/api/tasks").json()["results"]) == 3


def test_a_move_answers_404_for_a_task_it_cannot_see_before_anything_else(cast):
    """Moves read their task under the lock, after the body: the order of answers is kept."""
    hidden = create(cast.human, agent_id="agent-boss").json()["id"]
    sarah = cast.client(cast.sarah)
    for path, body in [
        ("status", {"status": "bogus"}),
        ("assign", {"agent_id": "agent-nobody"}),
        ("assign", {"agentId": "agent-alex"}),  # names another agent: 403 were it visible
        ("delegate", {}),
    ]:
        assert_error(post(sarah, f"/api/tasks/{hidden}/{path}", body), 404, "task_not_found")
    mine = create(sarah).json()["id"]
    assert_error(post(sarah, f"/api/tasks/{mine}/status", {"status": "bogus"}), 400, "invalid")
    assert_error(
        post(sarah, f"/api/tasks/{mine}/assign", {"agent_id": "agent-nobody"}),
        404,
        "agent_not_found",
    )
    # A human cannot delegate (403), but an unknown agent is still a 404 first.
    assert_error(
        post(cast.human, f"/api/tasks/{mine}/delegate", {"agent_id": "agent-nobody"}),
        404,
        "agent_not_found",
    )
    assert_error(
        post(cast.human, f"/api/tasks/{mine}/delegate", {"agent_id": "agent-alex"}),
        403,
        "agent_required",
    )


def test_a_delegator_still_sees_the_task_it_passed_on(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    assert cast.client(cast.sarah).get(f"/api/tasks/{task['id']}").status_code == 200


def test_list_filters(cast):
    create(cast.human, agent_id="agent-alex", urgency="high", required_expertise="PostgreSQL")
    create(
        cast.client(cast.sarah), agent_id="agent-sarah", urgency="low", required_expertise="React"
    )
    create(cast.human)

    def ids(query):
        response = cast.human.get(f"/api/tasks?{query}")
        assert response.status_code == 200, response.content
        return sorted(t["title"] + ":" + (t["assignee"] or "-") for t in response.json()["results"])

    assert ids("assignee=agent-alex") == ["A task:agent-alex"]
    assert ids("status=queued") == ["A task:-"]
    Task.objects.filter(status="queued").update(queued_for=cast.morgan)
    assert ids("queued_for=agent-morgan") == ["A task:-"]
    assert ids("queued_for=agent-alex") == []
    assert ids("urgency=low") == ["A task:agent-sarah"]
    assert (
        ids("required_expertise=PostgreSQL") == ids("expertise=PostgreSQL") == ["A task:agent-alex"]
    )
    assert (
        ids("created_by_agent=agent-sarah")
        == ids("created_by=agent-sarah")
        == ["A task:agent-sarah"]
    )
    assert_error(cast.human.get("/api/tasks?status=sleeping"), 400, "invalid")


def test_list_query_count_does_not_grow_with_tasks(cast, django_assert_max_num_queries):
    give_tasks(cast.morgan, 5)
    for _ in range(10):
        task = create(cast.human).json()
        post(cast.human, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"})
    client = cast.human
    with django_assert_max_num_queries(8):
        response = client.get("/api/tasks?status=queued")
    waits = [t["estimated_wait_seconds"] for t in response.json()["results"]]
    assert sorted(waits) == [720 * n for n in range(1, 11)]


def test_a_human_must_name_the_assignee(cast):
    task = create(cast.human).json()
    assert_error(post(cast.human, f"/api/tasks/{task['id']}/assign", {}), 403, "agent_required")
