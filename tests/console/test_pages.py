"""The pages behind the dashboard (issue 13 §2): an escalated or blocked task opens on a banner
whose actions go through the services, a task reads as a story, a collaboration opens on its
outcome. Every agent's word is escaped."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from collaboration.models import CollaborationSession, Contribution
from tasks.demo import BLOCKED_NOTE, ESCALATED
from tasks.models import EventKind, Task, TaskComment, TaskEvent, TaskStatus
from tests.factories import make_admin_user, make_org

SCRIPT = "<script>alert('x')</script>"


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client


def page_of(client, task) -> str:
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode()


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


def test_a_task_reads_as_a_story_without_raw_json(root_client, demo):
    task = Task.objects.get(organization=demo, title="Set up a staging cluster")
    html = page_of(root_client, task)
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert "delegated the task to agent-jordan" in timeline
    assert "Fallback:</strong> Sam (Infrastructure Lead) when back." in timeline
    assert "Busy but has room (4/5)" in timeline
    assert "Note:</strong> Down my reporting line: Jordan reports to Sam" in timeline
    # Alice's delegation down her reporting line is not cross-team, whatever the teams.
    assert "Cross-team" not in timeline
    assert "&quot;status&quot;" not in html and '{"status"' not in html  # no event snapshot
    assert "Passed through" in html


def test_a_task_page_shows_what_its_tree_cost(root_client, demo):
    from decimal import Decimal

    from costs.models import UsageRecord

    task = Task.objects.get(organization=demo, title="Set up a staging cluster")
    sub = Task.objects.create(organization=demo, title="sub", parent=task)
    UsageRecord.objects.bulk_create(
        UsageRecord(
            organization=demo,
            task=t,
            purpose="run",
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal(cost),
            price_source="genai-prices",
        )
        for t, cost in ((task, "0.5"), (sub, "0.25"))
    )
    html = page_of(root_client, task)
    assert html.split('id="task-cost">')[1].startswith("$0.7500")


def a_vote(org, **fields):
    session = CollaborationSession.objects.create(
        organization=org,
        task="Ship on Friday?",
        status="completed",
        synthesis="vote",
        max_parallel=3,
        agent_timeout=60,
        max_total_tokens=10_000,
        result=f"VERDICT: yes {SCRIPT}",
        **fields,
    )
    for i, (key, verdict, answer) in enumerate(
        [
            ("agent-a", "yes", "The tests pass. Ship it."),
            ("agent-b", "Yes", "Fine by me."),
            ("agent-c", "no", f"The migration is not reversible. {SCRIPT}"),
        ]
    ):
        Contribution.objects.create(
            session=session,
            position=i,
            agent_key=key,
            status="completed",
            verdict=verdict,
            confidence=0.8,
            response=answer,
            tokens_used=100 + i,
        )
    return session


def test_a_collaboration_opens_on_its_outcome_in_words_with_no_save_button(root_client, db):
    session = a_vote(make_org("acme"))
    response = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert "2 yes, 1 no — 67 % agreement" in html
    assert "The dissent:</strong> agent-c (no): The migration is not reversible." in html
    assert html.count('<article class="agent-card') == 3
    assert "confidence 80%" in html and "102 tokens" in html
    assert 'name="_save"' not in html and 'name="_continue"' not in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "consensus" not in response.context["adminform"].form.fields


def test_a_long_task_page_tells_its_latest_events_and_comments_and_links_the_rest(
    root_client, demo, django_assert_max_num_queries
):
    """An agent in a loop can write thousands of events and comments on one task: its page
    tells the latest (in order) and says where the rest are, in the same queries."""
    from console.story import COMMENTS_SHOWN, MOMENTS_SHOWN

    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    escalated_by = task.events.order_by("-pk").first()
    extra = MOMENTS_SHOWN + 50
    TaskEvent.objects.bulk_create(
        TaskEvent(
            organization=demo,
            task=task,
            kind=EventKind.COMMENT,
            actor_kind="agent",
            actor_label="agent-jordan",
            message=f"Note {i:04d}.",
        )
        for i in range(extra)
    )
    TaskComment.objects.bulk_create(
        TaskComment(organization=demo, task=task, author_label="agent-jordan", body=f"Ping {i:04d}")
        for i in range(COMMENTS_SHOWN + 30)
    )
    events_total = task.events.count()

    url = reverse("admin:tasks_task_change", args=[task.pk])
    root_client.get(url)
    with django_assert_max_num_queries(40):
        html = root_client.get(url).content.decode()
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert timeline.count('class="moment ') == MOMENTS_SHOWN
    assert f"Note {extra - 1:04d}." in timeline and f"Note {extra - MOMENTS_SHOWN:04d}." in timeline
    assert f"Note {extra - MOMENTS_SHOWN - 1:04d}." not in timeline
    assert timeline.index("Note 0100.") < timeline.index("Note 0101.")  # oldest first
    assert f"The latest {MOMENTS_SHOWN} of its {events_total} events" in html
    assert f"/admin/tasks/taskevent/?task__id__exact={task.pk}" in html
    comments = html.split('id="comments"')[1].split("</div>\n\n")[0]
    assert comments.count('class="comment"') == COMMENTS_SHOWN
    assert f"Ping {COMMENTS_SHOWN + 29:04d}" in comments and "Ping 0029<" not in comments
    assert f"The latest {COMMENTS_SHOWN} of its {COMMENTS_SHOWN + 30} comments" in html
    # The banner still says who escalated it and why, though that event is no longer shown.
    banner = html.split('id="attention-banner"')[1].split("</section>")[0]
    assert escalated_by.actor_label in banner
    assert ESCALATED[3].replace("'", "&#x27;") in banner


def test_a_short_task_page_tells_every_event_with_no_cut(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    html = page_of(root_client, task)
    assert 'id="timeline-cut"' not in html and 'id="comments-cut"' not in html


def test_an_outcome_card_says_its_status_in_words(root_client, db):
    """Choices read as words on every console page (docs/admin.md): "Timed out", never the
    API's `timed_out`."""
    session = a_vote(make_org("acme"))
    session.contributions.filter(agent_key="agent-c").update(status="timed_out", verdict="")
    html = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    facts = [part.split("</div>")[0] for part in html.split('<div class="facts">')[1:]]
    assert len(facts) == 3
    assert "Timed out" in facts[2] and "timed_out" not in facts[2], facts[2]
    assert "Completed" in facts[0], facts[0]


def test_an_outcome_counts_the_synthesis_tokens_and_keeps_an_agents_cost_its_own(root_client, db):
    """The page's tokens are the session's (the API's metadata.total_tokens: the agents' and the
    coordinator's), and a specialist named "coordinator" is not charged with the synthesis."""
    from decimal import Decimal

    from costs.models import UsageRecord

    org = make_org("acme")
    session = a_vote(org, metadata={"total_tokens": 803, "synthesis_tokens": 500})
    session.contributions.filter(agent_key="agent-a").update(agent_key="coordinator")
    UsageRecord.objects.bulk_create(
        UsageRecord(
            organization=org,
            session=session,
            label=label,
            purpose=purpose,
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal(cost),
            price_source="genai-prices",
        )
        for label, purpose, cost in (
            ("coordinator", "collaboration", "0.25"),
            ("agent-b", "collaboration", "0.5"),
            ("coordinator", "synthesis", "2"),
        )
    )
    response = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert "803 tokens" in html
    assert "(the coordinator $2.00)" in html
    costs = [part.split("</span>")[0] for part in html.split('<span class="card-cost">')[1:]]
    assert costs == ["$0.2500", "$0.5000"]


# --- the escalation banner leads with the experts; a full one is queued for -----------------


def suggested(banner: str) -> list[tuple[str, str]]:
    """(agent, action) of each suggestion row, in order."""
    import re

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


# --- a task whose holder a budget holds back says so ----------------------------------------


def held_by_budget(org, handle="agent-alex", limit="0"):
    """The agent made managed, under an exhausted agent budget (as spent this month)."""
    from costs.metering import current_period
    from costs.models import Budget

    agent = org.agents.get(handle=handle)
    agent.runtime = "managed"
    agent.save(update_fields=["runtime"])
    budget = Budget.objects.create(
        organization=org,
        scope="agent",
        agent=agent,
        limit_usd=limit,
        spent_usd=limit,
        period=current_period(),
    )
    return agent, budget


def test_a_task_whose_holder_is_held_for_budget_says_so_with_a_link_to_the_budget(
    root_client, demo
):
    alex, budget = held_by_budget(demo, limit="1")
    task = Task.objects.filter(organization=demo, assignee=alex).first()
    html = page_of(root_client, task)
    notice = html.split('id="notice-held-for-budget"')[1].split("</section>")[0]
    assert "Held for budget: Alex cannot work on it." in notice
    assert "agent budget “agent-alex” has no room this month: $1.00 spent of $1.00" in notice
    assert reverse("admin:costs_budget_change", args=[budget.pk]) in notice


def test_no_budget_notice_for_an_external_holder_or_a_budget_with_room(root_client, demo):
    alex, budget = held_by_budget(demo, limit="1")
    task = Task.objects.filter(organization=demo, assignee=alex).first()
    budget.limit_usd = 5
    budget.save()
    assert 'id="notice-held-for-budget"' not in page_of(root_client, task)
    budget.limit_usd = 1
    budget.save()
    alex.runtime = "external"  # its own program calls models: nothing the service holds back
    alex.save(update_fields=["runtime"])
    assert 'id="notice-held-for-budget"' not in page_of(root_client, task)
