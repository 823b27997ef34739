"""The banner an escalated or blocked task opens on (console/banner.py): who, when and why, the
suggested assignees (experts first, a full one queued for), and its moves through the services."""

import re

from django.contrib.auth import get_user_model
from django.urls import reverse

from tasks.demo import BLOCKED_NOTE, ESCALATED
from tasks.models import (
    NOTE_MAX_LENGTH,
    EventKind,
    Task,
    TaskComment,
    TaskEvent,
    TaskStatus,
)
from tests.console.data import SCRIPT
from tests.console.pages import page_of
from tests.factories import give_tasks, make_admin_user, make_agent, make_org


def test_an_escalated_task_opens_on_who_when_why_and_suggested_assignees(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    html = page_of(root_client, task)
    banner = html.split('id="attention-banner"')[1].split("</section>")[0]
    assert "Escalated by" in banner and "agent-jordan" in banner
    assert ESCALATED[3].replace("'", "&#x27;") in banner
    assert "Suggested assignees" in banner
    for action in ("console/assign/", "console/comment/", "console/cancel/"):
        assert action in banner


def test_a_blocked_task_opens_on_the_holders_words(root_client, demo):
    task = Task.objects.get(organization=demo, status=TaskStatus.BLOCKED)
    banner = page_of(root_client, task).split('id="attention-banner"')[1].split("</section>")[0]
    assert "Blocked by" in banner
    assert BLOCKED_NOTE.replace("'", "&#x27;") in banner
    # The holder it is blocked on is not suggested to take it again.
    assert f'data-agent="{task.assignee.handle}"' not in banner


def test_a_task_that_waits_on_nobody_has_no_banner(root_client, demo):
    task = Task.objects.filter(organization=demo, status=TaskStatus.IN_PROGRESS).first()
    assert 'id="attention-banner"' not in page_of(root_client, task)


def test_the_banner_assigns_through_the_services(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    taker = demo.agents.filter(is_paused=False).order_by("handle").first()
    url = reverse("admin:tasks_task_console_assign", args=[task.pk])
    assert root_client.get(url).status_code == 405
    response = root_client.post(url, {"agent": taker.handle})
    assert response.status_code == 302
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, taker)
    event = task.events.order_by("-pk").first()
    assert (event.kind, event.actor_kind) == (EventKind.ASSIGNED, "user")


def test_the_banner_refuses_a_full_agent_with_the_engines_reason(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    response = root_client.post(
        reverse("admin:tasks_task_console_assign", args=[task.pk]),
        {"agent": "agent-database-lead"},  # Morgan, 5/5
        follow=True,
    )
    assert "capacity_exceeded" in response.content.decode()
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED


def test_the_banner_comments_and_cancels_through_the_services(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    root_client.post(reverse("admin:tasks_task_console_comment", args=[task.pk]), {"body": SCRIPT})
    comment = TaskComment.objects.get(task=task)
    assert comment.body == SCRIPT
    html = page_of(root_client, task)
    assert SCRIPT not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    root_client.post(
        reverse("admin:tasks_task_console_cancel", args=[task.pk]), {"reason": "Not this quarter."}
    )
    task.refresh_from_db()
    assert task.status == TaskStatus.CANCELLED
    assert "Not this quarter." in page_of(root_client, task)


def test_another_organizations_staff_can_neither_see_nor_move_the_task(client, demo):
    client.force_login(make_admin_user(make_org("elsewhere"), username="eve"))
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    response = client.post(
        reverse("admin:tasks_task_console_cancel", args=[task.pk]), {"reason": "mine now"}
    )
    assert response.status_code == 404
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED


def suggested(banner: str) -> list[tuple[str, str]]:
    """(agent, action) of each suggestion row, in order."""

    return re.findall(r'class="suggestion" data-agent="([^"]+)" data-action="([a-z]+)"', banner)


def test_the_escalation_banner_leads_with_the_full_expert_to_queue_for(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    banner = page_of(root_client, task).split('id="attention-banner"')[1].split("</section>")[0]
    rows = suggested(banner)
    # Jordan, the only AWS expert online, is full (5/5): first, to queue for; then who has room.
    assert rows[0] == ("agent-jordan", "queue")
    assert [action for _, action in rows[1:]] == ["assign"] * (len(rows) - 1) and rows[1:]
    jordan = banner.split('data-agent="agent-jordan"')[1].split("</tr>")[0]
    assert "Queue for them" in jordan and ">Assign<" not in jordan
    assert "The agents with AWS first" in banner


def test_queue_for_them_queues_the_escalated_task_for_the_full_expert(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    jordan = demo.agents.get(handle="agent-jordan")
    url = reverse("admin:tasks_task_queue", args=[task.pk])
    assert root_client.get(url).status_code == 405
    response = root_client.post(url, {"agent": "agent-jordan"}, follow=True)
    assert response.redirect_chain == [(reverse("admin:tasks_task_change", args=[task.pk]), 302)]
    assert "Queued for Jordan" in response.content.decode()
    task.refresh_from_db()
    assert (task.status, task.queued_for, task.assignee) == (TaskStatus.QUEUED, jordan, None)
    event = task.events.order_by("-pk").first()
    assert (event.kind, event.actor_kind, event.actor_label) == (
        EventKind.QUEUED,
        "user",
        "user:root",
    )  # as the assign and the API record a human
    assert (event.recipient, event.decision, event.primary_choice) == (
        jordan,
        "QUEUE",
        "agent-jordan",
    )
    assert event.before["status"] == TaskStatus.ESCALATED
    assert event.after["status"] == TaskStatus.QUEUED
    assert 'id="attention-banner"' not in response.content.decode()


def test_queue_for_them_refuses_an_expert_with_room_with_the_engines_reason(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    response = root_client.post(
        reverse("admin:tasks_task_queue", args=[task.pk]), {"agent": "agent-alex"}, follow=True
    )
    assert "expert_available" in response.content.decode()
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED


def test_queue_for_them_is_a_csrf_protected_post_scoped_to_the_organization(client, demo):
    from django.test import Client

    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    url = reverse("admin:tasks_task_queue", args=[task.pk])
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_admin_user(demo, username="bob"))
    assert strict.post(url, {"agent": "agent-jordan"}).status_code == 403
    client.force_login(make_admin_user(make_org("elsewhere"), username="eve"))
    assert client.post(url, {"agent": "agent-jordan"}).status_code == 404
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED


def test_queue_for_them_needs_an_admin_of_the_organization(client, demo):
    from organization.models import Membership

    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    url = reverse("admin:tasks_task_queue", args=[task.pk])
    anonymous = client.post(url, {"agent": "agent-jordan"})
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    member = get_user_model().objects.create_user("member", "m@example.com", "pw", is_staff=True)
    Membership.objects.create(organization=demo, user=member, is_admin=False)
    client.force_login(member)
    assert client.post(url, {"agent": "agent-jordan"}).status_code == 404
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED


def _banner(client, task) -> str:
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode().split('id="attention-banner"')[1].split("</section>")[0]


def test_the_banner_suggests_an_agent_with_room_even_behind_many_full_agents(root_client):
    """docs/admin.md: a task that asks for no expertise is offered "the least loaded agents
    online" (with room). console/banner.py: suggestions reads only the first 15 agents by
    workload and drops the full ones afterwards: when 15 small-capacity agents are full with
    one task each, an agent holding 2 of 5 is never read, and the banner says "Nobody online
    has room for it now" although someone has."""
    org = make_org("acme")
    for i in range(15):
        give_tasks(make_agent(org, f"agent-small-{i}", workload_capacity=1), 1)
    roomy = make_agent(org, "agent-roomy")  # capacity 5
    give_tasks(roomy, 2)
    task = Task.objects.create(organization=org, title="Anyone?", status=TaskStatus.ESCALATED)
    banner = _banner(root_client, task)
    assert 'data-agent="agent-roomy"' in banner
    assert "Nobody online has room" not in banner


def test_the_banner_offers_a_full_expert_a_queue_never_an_assign(root_client):
    """An expert at capacity can only refuse an assignment (409 capacity_exceeded): the banner
    offers to queue the task for them instead (`tasks_task_queue`), never *Assign*."""
    org = make_org("acme")
    full = make_agent(org, "agent-full", expertise=["PostgreSQL"], workload_capacity=2)
    give_tasks(full, 2)
    task = Task.objects.create(
        organization=org,
        title="Tune the database",
        status=TaskStatus.ESCALATED,
        required_expertise="PostgreSQL",
    )
    banner = _banner(root_client, task)
    row = banner.split('data-agent="agent-full"')[1].split("</tr>")[0]
    assert 'data-action="queue"' in row and "Queue for them" in row
    assert reverse("admin:tasks_task_queue", args=[task.pk]) in row
    assert reverse("admin:tasks_task_console_assign", args=[task.pk]) not in row


def test_the_banner_cancel_refuses_a_reason_longer_than_the_api_allows(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    reason = "x" * (NOTE_MAX_LENGTH * 50)  # 100,000 characters
    response = root_client.post(
        reverse("admin:tasks_task_console_cancel", args=[task.pk]), {"reason": reason}
    )
    assert response.status_code == 302
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages == [f"A reason holds at most {NOTE_MAX_LENGTH} characters."]
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED
    assert not TaskEvent.objects.filter(task=task, reasoning=reason).exists()
