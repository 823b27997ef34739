"""The approval gate (issue 37 §2): a gated move answers 202 with a decision, at every door;
deciding it runs the move as the requester, bound to what was asked."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from organization.caller import caller_for_admin
from tasks import services
from tasks.models import DecisionStatus, HumanDecision, InboxItem, Task, TaskEvent, TaskStatus
from tasks.rules import Actor
from tests.factories import make_admin_user, make_org
from tests.tasks.conftest import assert_error, create, post
from tests.tasks.test_tools import call

pytestmark = pytest.mark.django_db


def policy(cast, **fields):
    body = {"name": "Cross-team waits", "trigger": "cross_team_delegation", **fields}
    response = post(cast.human, "/api/approval-policies", body)
    assert response.status_code == 201, response.content
    return response.json()


def held_by_sarah(cast, **fields):
    response = create(cast.client(cast.sarah), agent_id="agent-sarah", **fields)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def delegate(cast, task_id, to="agent-morgan"):
    return post(
        cast.client(cast.sarah),
        f"/api/tasks/{task_id}/delegate",
        {"agent_id": to, "reasoning": "MySQL"},
    )


def gated(cast, task_id) -> dict:
    response = delegate(cast, task_id)
    assert response.status_code == 202, response.content
    return response.json()["decision"]


def test_a_cross_team_delegation_waits_for_a_human(cast):
    made = policy(cast)
    task_id = held_by_sarah(cast)
    response = delegate(cast, task_id)

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "awaiting_approval"
    decision = body["decision"]
    assert decision["kind"] == "approval"
    assert decision["policy"] == made["id"]
    assert decision["requested_by"] == "agent-sarah"
    assert decision["task"] == task_id
    assert decision["status"] == "pending"
    assert decision["action"] == {
        "name": "delegate_task",
        "arguments": {"task_id": task_id, "agent_id": "agent-morgan", "reasoning": "MySQL"},
    }
    assert decision["expires_at"] is not None
    assert (decision["decided_by"], decision["outcome"]) == (None, None)
    # Nothing moved: the task is still Sarah's.
    task = Task.objects.get(pk=task_id)
    assert (task.assignee, task.status) == (cast.sarah, TaskStatus.ASSIGNED)
    assert TaskEvent.objects.filter(task_id=task_id, kind="decision").exists()


def test_a_delegation_within_the_team_is_not_gated(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    assert delegate(cast, task_id, to="agent-alex").status_code == 200


def test_a_disabled_policy_gates_nothing(cast):
    policy(cast, enabled=False)
    assert delegate(cast, held_by_sarah(cast)).status_code == 200


def test_a_team_scoped_policy_gates_only_its_team(cast):
    policy(cast, scope="team", team="Data")
    assert delegate(cast, held_by_sarah(cast)).status_code == 200
    policy(cast, scope="agent", agent="agent-sarah")
    assert delegate(cast, held_by_sarah(cast)).status_code == 202


def test_the_call_tool_door_returns_the_same_shape_as_its_result(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    response = call(
        cast.client(cast.sarah), "delegate_task", task_id=task_id, agent_id="agent-morgan"
    )
    assert response.status_code == 200, response.content
    result = response.json()
    result = result.get("result", result)
    assert result["status"] == "awaiting_approval"
    assert result["decision"]["action"]["name"] == "delegate_task"
    assert Task.objects.get(pk=task_id).assignee == cast.sarah


def test_approving_runs_the_move_as_the_requester_and_tells_it(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    response = post(cast.human, f"/api/decisions/{decision['id']}/approve", {"comment": "Go"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved"
    assert body["outcome"] == {"result": "executed", "reason": ""}
    assert body["comment"] == "Go"
    assert body["decided_by"].startswith("org-key:")
    assert body["decided_at"] is not None
    task = Task.objects.get(pk=task_id)
    assert task.assignee == cast.morgan
    delegated = TaskEvent.objects.get(task_id=task_id, kind="delegated")
    assert delegated.actor_agent == cast.sarah  # as the requester
    told = InboxItem.objects.filter(agent=cast.sarah, kind="decision")
    assert told.count() == 1
    assert "approved" in told.get().message


def test_a_decision_no_longer_pending_is_409_decision_closed(cast):
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    assert post(cast.human, f"/api/decisions/{decision['id']}/reject").status_code == 200
    for verb in ("approve", "reject", "request_changes"):
        assert_error(
            post(cast.human, f"/api/decisions/{decision['id']}/{verb}"), 409, "decision_closed"
        )


def test_an_agent_key_may_not_decide(cast):
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    for agent in (cast.sarah, cast.boss):
        response = post(cast.client(agent), f"/api/decisions/{decision['id']}/approve")
        assert_error(response, 403, "human_required")


def test_rejecting_leaves_the_task_and_tells_the_requester(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    response = post(cast.human, f"/api/decisions/{decision['id']}/reject", {"comment": "Ask Alex"})
    assert response.json()["status"] == "rejected"
    assert Task.objects.get(pk=task_id).assignee == cast.sarah
    item = InboxItem.objects.get(agent=cast.sarah, kind="decision")
    assert "Ask Alex" in item.message


def test_request_changes_tells_the_requester(cast):
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    response = post(
        cast.human, f"/api/decisions/{decision['id']}/request_changes", {"comment": "Split it"}
    )
    assert response.json()["status"] == "changes_requested"
    assert InboxItem.objects.filter(agent=cast.sarah, kind="decision").count() == 1


def test_approving_a_changed_target_supersedes_the_decision(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    assert (
        post(cast.human, f"/api/tasks/{task_id}/assign", {"agent_id": "agent-alex"}).status_code
        == 200
    )

    response = post(cast.human, f"/api/decisions/{decision['id']}/approve")
    assert_error(response, 409, "target_changed")
    stored = HumanDecision.objects.get(pk=decision["id"])
    assert stored.status == DecisionStatus.SUPERSEDED
    assert stored.outcome["result"] == "skipped"
    assert Task.objects.get(pk=task_id).assignee == cast.alex
    assert InboxItem.objects.filter(agent=cast.sarah, kind="decision").exists()


def test_approved_arguments_are_edited_and_validated_as_the_moves_own(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    url = f"/api/decisions/{decision['id']}/approve"
    bad = post(cast.human, url, {"arguments": {"task_id": task_id, "agent_id": 12}})
    assert_error(bad, 400, "invalid", "agent_id")
    assert HumanDecision.objects.get(pk=decision["id"]).status == "pending"

    edited = {"task_id": task_id, "agent_id": "agent-morgan", "reasoning": "Edited by a human"}
    response = post(cast.human, url, {"arguments": edited})
    assert response.json()["action"]["arguments"] == edited
    event = TaskEvent.objects.get(task_id=task_id, kind="delegated")
    assert event.reasoning == "Edited by a human"


def test_a_move_that_fails_when_approved_records_why(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    cast.morgan.is_paused = True
    cast.morgan.save()
    response = post(cast.human, f"/api/decisions/{decision['id']}/approve")
    body = response.json()
    assert body["status"] == "approved"
    assert body["outcome"]["result"] == "failed"
    assert "agent_offline" in body["outcome"]["reason"]


def test_an_urgency_policy_gates_a_task_created_at_that_urgency(cast):
    policy(cast, name="Critical waits", trigger="urgency", urgencies=["critical"])
    sarah = cast.client(cast.sarah)
    response = create(sarah, title="Fix prod", urgency="critical", agent_id="agent-alex")
    assert response.status_code == 202, response.content
    decision = response.json()["decision"]
    assert decision["action"]["name"] == "create_task"
    assert not Task.objects.filter(title="Fix prod").exists()
    assert create(sarah, title="Later", urgency="low").status_code == 201

    approved = post(cast.human, f"/api/decisions/{decision['id']}/approve").json()
    assert approved["outcome"]["result"] == "executed"
    task = Task.objects.get(title="Fix prod")
    assert (task.assignee, task.created_by_agent) == (cast.alex, cast.sarah)


def test_no_one_decides_a_request_their_own_action_raised(cast):
    policy(cast, name="Critical waits", trigger="urgency", urgencies=["critical"])
    response = create(cast.human, title="Fix prod", urgency="critical")
    decision = response.json()["decision"]
    assert decision["requested_by"] is None
    assert_error(post(cast.human, f"/api/decisions/{decision['id']}/approve"), 403, "own_request")


def test_a_tool_policy_gates_an_agents_call_of_that_tool(cast):
    policy(cast, name="Comments wait", trigger="tool", tools=["comment_on_task"])
    task_id = held_by_sarah(cast)
    response = call(cast.client(cast.sarah), "comment_on_task", task_id=task_id, body="Hello")
    result = response.json()
    result = result.get("result", result)
    assert result["status"] == "awaiting_approval"
    assert not cast.org.tasks.get(pk=task_id).comments.exists()

    decision = result["decision"]
    approved = post(cast.human, f"/api/decisions/{decision['id']}/approve").json()
    assert approved["outcome"]["result"] == "executed"
    assert cast.org.tasks.get(pk=task_id).comments.get().body == "Hello"


def test_the_admin_door_meets_the_gate(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    staff = make_admin_user(cast.org)
    task = Task.objects.get(pk=task_id)
    actor = Actor.of(caller_for_admin(type("R", (), {"user": staff})(), cast.org))
    # A human's assign crosses no team (only an agent's routing does): the urgency policy then.
    policy(cast, name="High waits", trigger="urgency", urgencies=["normal"])
    with pytest.raises(services.AwaitingApproval):
        services.task_assign(task=task, actor=actor, to=cast.morgan)
    assert Task.objects.get(pk=task_id).assignee == cast.sarah


def test_deciders_are_the_policys_named_users(cast, client):
    make_admin_user(cast.org, username="dana")
    other = make_admin_user(cast.org, username="eve")
    policy(cast, deciders=["dana"])
    decision = gated(cast, held_by_sarah(cast))
    client.force_login(other)
    response = client.post(
        f"/api/decisions/{decision['id']}/approve", {}, content_type="application/json"
    )
    assert_error(response, 403, "not_a_decider")


def test_deciders_hear_by_email_with_one_click_links(cast, django_capture_on_commit_callbacks):
    make_admin_user(cast.org, username="dana", email="dana@example.com")
    make_admin_user(cast.org, username="eve", email="eve@example.com")
    policy(cast, deciders=["dana"])
    with django_capture_on_commit_callbacks(execute=True):
        decision = gated(cast, held_by_sarah(cast))
    assert [m.to for m in mail.outbox] == [["dana@example.com"]]
    body = mail.outbox[0].body
    assert f"/admin/tasks/humandecision/{decision['id']}/confirm/approve/?t=" in body
    assert "/confirm/reject/?t=" in body
    assert "agent-morgan" in body


def test_the_one_click_link_confirms_after_login_and_works_once(
    cast, client, django_capture_on_commit_callbacks
):
    dana = make_admin_user(cast.org, username="dana", email="dana@example.com")
    policy(cast, deciders=["dana"])
    task_id = held_by_sarah(cast)
    with django_capture_on_commit_callbacks(execute=True):
        decision = gated(cast, task_id)
    link = next(line for line in mail.outbox[0].body.splitlines() if line.startswith("Approve: "))
    path = link.split("://", 1)[1].split("/", 1)[1]
    path = "/" + path

    assert client.get(path).status_code == 302  # to the login page first
    client.force_login(dana)
    page = client.get(path)
    assert page.status_code == 200
    assert b"agent-morgan" in page.content
    tampered = path.replace("/approve/", "/reject/")
    assert client.get(tampered).status_code == 403

    token = path.split("?t=", 1)[1]
    done = client.post(path.split("?")[0], {"t": token})
    assert done.status_code == 302
    assert HumanDecision.objects.get(pk=decision["id"]).status == "approved"
    assert Task.objects.get(pk=task_id).assignee == cast.morgan
    again = client.post(path.split("?")[0], {"t": token}, follow=True)
    assert b"decision_closed" in again.content


def test_decisions_are_listed_filtered_and_scoped(cast):
    policy(cast)
    first = gated(cast, held_by_sarah(cast))
    post(cast.human, f"/api/decisions/{first['id']}/reject")
    second = gated(cast, held_by_sarah(cast))

    ids = lambda r: [d["id"] for d in r.json()["results"]]  # noqa: E731
    assert ids(cast.human.get("/api/decisions")) == [second["id"], first["id"]]
    assert ids(cast.human.get("/api/decisions?status=pending")) == [second["id"]]
    assert ids(cast.human.get(f"/api/decisions?task={first['task']}")) == [first["id"]]
    assert ids(cast.human.get("/api/decisions?kind=question")) == []
    # Sarah asked for both; Alex sees neither task.
    assert ids(cast.client(cast.sarah).get("/api/decisions")) == [second["id"], first["id"]]
    assert ids(cast.client(cast.alex).get("/api/decisions")) == []
    assert_error(
        cast.client(cast.alex).get(f"/api/decisions/{first['id']}"), 404, "decision_not_found"
    )

    from tests.conftest import KeyClient
    from tests.factories import make_key

    other = KeyClient(make_key(make_org("other")))
    assert_error(other.get(f"/api/decisions/{first['id']}"), 404, "decision_not_found")
    assert_error(post(other, f"/api/decisions/{first['id']}/approve"), 404, "decision_not_found")


def test_the_requester_withdraws_its_decision(cast):
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    assert_error(
        post(cast.client(cast.alex), f"/api/decisions/{decision['id']}/cancel"),
        404,
        "decision_not_found",
    )
    response = post(cast.client(cast.sarah), f"/api/decisions/{decision['id']}/cancel")
    assert response.json()["status"] == "cancelled"
    assert_error(
        post(cast.human, f"/api/decisions/{decision['id']}/approve"), 409, "decision_closed"
    )


# --- expiry, from the sweep the beat runs ----------------------------------------------------


def test_the_sweep_warns_then_expires_rejecting_by_default(
    cast, django_capture_on_commit_callbacks
):
    make_admin_user(cast.org, username="dana", email="dana@example.com")
    policy(cast, expires_after_seconds=60, warn_before_seconds=30)
    task_id = held_by_sarah(cast)
    with django_capture_on_commit_callbacks(execute=True):
        decision = gated(cast, task_id)
    mail.outbox.clear()
    now = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        assert services.decisions_sweep(now + timedelta(seconds=10))["warned"] == 0
        assert services.decisions_sweep(now + timedelta(seconds=40))["warned"] == 1
        assert services.decisions_sweep(now + timedelta(seconds=45))["warned"] == 0
    assert len(mail.outbox) == 1 and "expires soon" in mail.outbox[0].subject

    assert services.decisions_sweep(now + timedelta(seconds=61))["expired"] == 1
    stored = HumanDecision.objects.get(pk=decision["id"])
    assert stored.status == DecisionStatus.EXPIRED
    assert stored.outcome["result"] == "skipped"
    assert Task.objects.get(pk=task_id).assignee == cast.sarah
    item = InboxItem.objects.get(agent=cast.sarah, kind="decision")
    assert "Expired" in item.message


def test_an_expired_approval_executes_only_when_its_policy_says_approve(cast):
    policy(cast, expires_after_seconds=5, on_expiry="approve")
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    services.decisions_sweep(timezone.now() + timedelta(seconds=6))
    stored = HumanDecision.objects.get(pk=decision["id"])
    assert (stored.status, stored.outcome["result"]) == ("expired", "executed")
    assert Task.objects.get(pk=task_id).assignee == cast.morgan


def test_the_sweep_supersedes_an_approval_whose_task_moved(cast):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    post(cast.human, f"/api/tasks/{task_id}/cancel")
    assert services.decisions_sweep()["superseded"] == 1
    assert HumanDecision.objects.get(pk=decision["id"]).status == "superseded"


# --- escalation_to_humans: a human picks the taker -------------------------------------------


def escalated_by_boss(cast) -> int:
    boss = cast.client(cast.boss)
    task_id = create(boss, agent_id="agent-boss").json()["id"]
    response = post(boss, f"/api/tasks/{task_id}/escalate", {"reason": "Not mine"})
    assert response.json()["status"] == "escalated", response.content
    return task_id


def test_an_escalation_to_humans_asks_a_human_to_pick_the_taker(cast):
    policy(cast, name="Pick a taker", trigger="escalation_to_humans", expires_after_seconds=600)
    task_id = escalated_by_boss(cast)
    decision = HumanDecision.objects.get(task_id=task_id)
    assert decision.action == {"name": "assign_task", "arguments": {"task_id": task_id}}
    assert decision.requested_by == cast.boss
    url = f"/api/decisions/{decision.pk}/approve"
    assert_error(post(cast.human, url), 400, "invalid", "agent_id")

    picked = {"task_id": task_id, "agent_id": "agent-alex"}
    response = post(cast.human, url, {"arguments": picked})
    assert response.json()["outcome"] == {"result": "executed", "reason": ""}
    task = Task.objects.get(pk=task_id)
    assert (task.assignee, task.status) == (cast.alex, TaskStatus.ASSIGNED)
    assert InboxItem.objects.filter(agent=cast.boss, kind="decision").exists()


def test_an_escalation_nobody_picked_a_taker_for_stays_escalated(cast):
    policy(cast, name="Pick a taker", trigger="escalation_to_humans", on_expiry="approve")
    task_id = escalated_by_boss(cast)
    services.decisions_sweep(timezone.now() + timedelta(days=2))
    decision = HumanDecision.objects.get(task_id=task_id)
    assert (decision.status, decision.outcome["result"]) == ("expired", "skipped")
    assert Task.objects.get(pk=task_id).status == TaskStatus.ESCALATED


def test_the_stale_sweep_escalating_to_humans_asks_a_human_to_pick_the_taker(cast):
    from tasks.sweep import sweep_stale_queued

    policy(
        cast, name="Pick a taker", trigger="escalation_to_humans", scope="agent", agent="agent-boss"
    )
    # Queued for the boss (who has no senior and no default supervisor above) long ago.
    task = Task.objects.create(
        organization=cast.org,
        title="Stale",
        status=TaskStatus.QUEUED,
        queued_for=cast.boss,
        queued_at=timezone.now() - timedelta(days=3),
    )
    assert sweep_stale_queued().escalated == 1
    assert Task.objects.get(pk=task.pk).status == TaskStatus.ESCALATED
    decision = HumanDecision.objects.get(task=task)
    assert (decision.status, decision.action) == (
        "pending",
        {"name": "assign_task", "arguments": {"task_id": task.pk}},
    )
