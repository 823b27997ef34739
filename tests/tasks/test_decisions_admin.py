"""Decisions in the console (issue 37 §3): the page says the request in words and decides it;
a policy's page counts how its decisions went; the dashboard leads with what waits."""

import pytest

from organization.models import Organization
from tasks.models import ApprovalPolicy, HumanDecision, Task
from tests.factories import make_admin_user
from tests.tasks.test_approval_gate import gated, held_by_sarah, policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(cast):
    return make_admin_user(cast.org, username="dana")


def test_the_decision_page_shows_the_request_and_approves_it(cast, client, dana):
    policy(cast)
    task_id = held_by_sarah(cast)
    decision = gated(cast, task_id)
    client.force_login(dana)
    page = client.get(f"/admin/tasks/humandecision/{decision['id']}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    for words in (
        "agent-sarah",
        "delegate_task",
        "agent-morgan",
        "Cross-team delegation",
        "Approve",
    ):
        assert words in html, words

    done = client.post(f"/admin/tasks/humandecision/{decision['id']}/decide/", {"verb": "approve"})
    assert done.status_code == 302
    stored = HumanDecision.objects.get(pk=decision["id"])
    assert (stored.status, stored.decided_by) == ("approved", dana)
    assert stored.decided_by_label == "user:dana"
    assert Task.objects.get(pk=task_id).assignee == cast.morgan


def test_user_text_on_the_decision_page_is_escaped(cast, client, dana):
    task_id = held_by_sarah(cast)
    response = cast.client(cast.sarah).post(
        "/api/decisions",
        {"task": task_id, "question": "<script>alert(1)</script>", "options": ["<b>x</b>"]},
        format="json",
    )
    client.force_login(dana)
    html = client.get(f"/admin/tasks/humandecision/{response.json()['id']}/change/").content
    assert b"<script>alert(1)</script>" not in html
    assert b"&lt;script&gt;" in html


def test_a_member_answers_a_question_from_the_console(cast, client, dana):
    task_id = held_by_sarah(cast)
    made = (
        cast.client(cast.sarah)
        .post(
            "/api/decisions",
            {"task": task_id, "question": "Region?", "options": ["eu", "us"]},
            format="json",
        )
        .json()
    )
    client.force_login(dana)
    client.post(
        f"/admin/tasks/humandecision/{made['id']}/decide/", {"verb": "answer", "answer": "eu"}
    )
    assert HumanDecision.objects.get(pk=made["id"]).answer == "eu"


def test_a_policys_page_counts_how_its_decisions_went(cast, client, dana):
    made = policy(cast)
    first = gated(cast, held_by_sarah(cast))
    cast.human.post(f"/api/decisions/{first['id']}/reject", {}, format="json")
    gated(cast, held_by_sarah(cast))
    client.force_login(dana)
    html = client.get(f"/admin/tasks/approvalpolicy/{made['id']}/change/").content.decode()
    assert "0 approved / 1 rejected / 0 expired / 1 pending" in html
    listing = client.get("/admin/tasks/approvalpolicy/").content.decode()
    assert "1 rejected" in listing


def test_a_policy_saved_in_the_admin_keeps_the_gate_flag(cast, client, dana):
    client.force_login(dana)
    response = client.post(
        "/admin/tasks/approvalpolicy/add/",
        {
            "organization": cast.org.pk,
            "name": "Admin-made",
            "trigger": "cross_team_delegation",
            "urgencies": "[]",
            "tools": "[]",
            "scope": "organization",
            "deciders": "[]",
            "expires_after_seconds": 3600,
            "warn_before_seconds": 0,
            "on_expiry": "reject",
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ApprovalPolicy.objects.get().name == "Admin-made"
    assert Organization.objects.get(pk=cast.org.pk).has_approval_policies


def test_the_dashboard_leads_with_the_decisions_waiting(cast, client, dana):
    policy(cast)
    gated(cast, held_by_sarah(cast))
    client.force_login(dana)
    html = client.get("/admin/").content.decode()
    attention = html.index('id="group-attention"')
    assert html.index('data-metric="decisions_waiting">1<') > attention
    assert html.index("Decisions waiting on you") < html.index("Escalated to humans")
