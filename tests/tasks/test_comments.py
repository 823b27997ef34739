"""Issue 11 §1, the conversation: `POST/GET /api/tasks/<id>/comments` and the tools
`comment_on_task` / `list_task_comments`. Whoever may see the task reads and writes; each
comment reaches the others involved (holder, creator, delegator), never its author."""

import pytest
from django.test import Client

from organization.caller import caller_for_agent
from organization.models import Agent
from tasks import services
from tasks.models import (
    COMMENT_MAX_LENGTH,
    InboxItem,
    Task,
    TaskComment,
    TaskEvent,
    WebhookDelivery,
)
from tasks.rules import Actor
from tests.factories import give_tasks, make_admin_user
from tests.tasks.conftest import assert_error, create, post
from tests.tasks.test_query_counts import used_just_now
from tests.tasks.test_tools import call


@pytest.fixture
def task(cast):
    """Morgan created it for Sarah, who delegated it to Alex: three agents involved."""
    task = create(
        cast.client(cast.morgan), title="Migrate the orders table", agent_id="agent-sarah"
    ).json()
    response = post(
        cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}
    )
    assert response.status_code == 200
    InboxItem.objects.all().delete()
    return task


def comment(client, task_id, body):
    return post(client, f"/api/tasks/{task_id}/comments", {"body": body})


def told(task_id) -> list[tuple[str, str]]:
    items = InboxItem.objects.filter(task_id=task_id, kind="comment").order_by("agent__handle")
    return [(i.agent.handle, i.message) for i in items]


def test_a_comment_reaches_the_others_involved_never_its_author(cast, task):
    response = comment(cast.client(cast.alex), task["id"], "Which index do we keep?")
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("task", "author", "author_label", "body")} == {
        "task": task["id"],
        "author": "agent-alex",
        "author_label": "agent-alex",
        "body": "Which index do we keep?",
    }
    message = "agent-alex commented on the task: Which index do we keep?"
    assert told(task["id"]) == [("agent-morgan", message), ("agent-sarah", message)]
    inbox = cast.client(cast.sarah).get("/api/inbox").json()["results"]
    assert [(i["kind"], i["actor"], i["task"]["id"]) for i in inbox] == [
        ("comment", "agent-alex", task["id"])
    ]


def test_a_humans_comment_reaches_every_agent_involved(cast, task):
    response = comment(cast.human, task["id"], "Please keep the old one.")
    assert response.status_code == 201
    assert response.json()["author"] is None
    assert response.json()["author_label"].startswith("org-key:")
    assert [who for who, _ in told(task["id"])] == ["agent-alex", "agent-morgan", "agent-sarah"]


def test_the_comments_read_oldest_first_and_page(cast, task):
    for n, (client, text) in enumerate(
        [
            (cast.client(cast.alex), "first"),
            (cast.human, "second"),
            (cast.client(cast.morgan), "third"),
        ]
    ):
        assert comment(client, task["id"], text).status_code == 201, n
    page = cast.client(cast.sarah).get(f"/api/tasks/{task['id']}/comments?limit=2").json()
    assert page["count"] == 3 and page["next"] and page["previous"] is None
    assert [(c["author"], c["body"]) for c in page["results"]] == [
        ("agent-alex", "first"),
        (None, "second"),
    ]
    rest = cast.client(cast.sarah).get(f"/api/tasks/{task['id']}/comments?offset=2").json()
    assert [c["body"] for c in rest["results"]] == ["third"]
    # The audit trail records who commented (the words are in the conversation).
    assert TaskEvent.objects.filter(task_id=task["id"], kind="comment").count() == 3


def test_an_agent_that_cannot_see_the_task_can_neither_read_nor_write(cast, task):
    boss = cast.client(cast.boss)
    assert_error(boss.get(f"/api/tasks/{task['id']}/comments"), 404, "task_not_found")
    assert_error(comment(boss, task["id"], "Let me in"), 404, "task_not_found")
    # 404 comes before anything is said about the body.
    assert_error(comment(boss, task["id"], ""), 404, "task_not_found")
    assert not TaskComment.objects.exists()


def test_the_body_is_required_and_bounded(cast, task):
    alex = cast.client(cast.alex)
    assert_error(comment(alex, task["id"], ""), 400, "invalid", "body")
    assert_error(post(alex, f"/api/tasks/{task['id']}/comments", {}), 400, "invalid", "body")
    over = comment(alex, task["id"], "x" * (COMMENT_MAX_LENGTH + 1))
    assert_error(over, 400, "invalid", "body")
    assert comment(alex, task["id"], "x" * COMMENT_MAX_LENGTH).status_code == 201
    assert_error(
        post(alex, f"/api/tasks/{task['id']}/comments", {"body": "hi", "agentId": "agent-sarah"}),
        403,
        "identity_mismatch",
    )


def test_a_long_comment_is_quoted_short_in_the_inbox(cast, task):
    comment(cast.client(cast.alex), task["id"], "word " * 100)
    message = dict(told(task["id"]))["agent-sarah"]
    assert len(message) < 260 and message.endswith("…")


def test_a_comment_on_a_queued_task_reaches_the_expert_it_waits_for(cast):
    waiting = create(cast.human, title="Tune MySQL").json()
    give_tasks(cast.morgan, 5)
    post(cast.human, f"/api/tasks/{waiting['id']}/queue", {"agent_id": "agent-morgan"})
    assert comment(cast.human, waiting["id"], "No hurry.").status_code == 201
    assert [who for who, _ in told(waiting["id"])] == ["agent-morgan"]


def test_a_comment_on_a_task_escalated_to_humans_reaches_the_agent_that_passed_it_up(cast):
    """Nobody holds a task that waits for humans: the agent that passed it to them is the one
    who delegated it, and a human's answer in a comment must reach it."""
    cast.sarah.senior = None
    cast.sarah.save()
    waiting = create(cast.human, title="Rotate the keys", agent_id="agent-sarah").json()
    escalated = post(
        cast.client(cast.sarah),
        f"/api/tasks/{waiting['id']}/escalate",
        {"reason": "I need the vault's password."},
    )
    assert escalated.json()["status"] == "escalated"
    assert comment(cast.human, waiting["id"], "It is in the ops vault.").status_code == 201
    [(who, message)] = told(waiting["id"])
    assert who == "agent-sarah" and message.endswith(
        "commented on the task: It is in the ops vault."
    )
    # Her own comment on it tells nobody (she is its author).
    InboxItem.objects.all().delete()
    assert comment(cast.client(cast.sarah), waiting["id"], "Thanks.").status_code == 201
    assert told(waiting["id"]) == []


@pytest.mark.postgres
def test_reading_the_comments_costs_the_same_whatever_their_number(
    cast, task, django_assert_max_num_queries
):
    for n in range(20):
        comment(cast.client([cast.alex, cast.morgan][n % 2]), task["id"], f"c{n}")
    sarah = cast.client(cast.sarah)
    used_just_now()
    # The key; the task; the count; the page with its authors.
    with django_assert_max_num_queries(4):
        response = sarah.get(f"/api/tasks/{task['id']}/comments")
    assert response.json()["count"] == 20


def test_the_admin_shows_the_conversation_escaped_and_the_subtasks(cast, task):
    comment(cast.client(cast.alex), task["id"], "<script>alert('x')</script> & <b>bold</b>")
    create(cast.human, title="A part of it", parent=task["id"])
    client = Client()
    client.force_login(make_admin_user(cast.org))
    page = client.get(f"/admin/tasks/task/{task['id']}/change/").content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert "<script>alert(" not in page
    assert "A part of it" in page


# --- the tools ---------------------------------------------------------------------------------


def test_comment_on_task_and_list_task_comments(cast, task):
    sent = call(cast.client(cast.alex), "comment_on_task", task_id=task["id"], body="On it.")
    assert sent.status_code == 200, sent.content
    assert (sent.json()["author"], sent.json()["body"]) == ("agent-alex", "On it.")
    assert [who for who, _ in told(task["id"])] == ["agent-morgan", "agent-sarah"]
    call(cast.client(cast.sarah), "comment_on_task", task_id=task["id"], body="Thanks.")
    listed = call(cast.client(cast.morgan), "list_task_comments", task_id=task["id"]).json()
    assert [(c["author"], c["body"]) for c in listed["comments"]] == [
        ("agent-alex", "On it."),
        ("agent-sarah", "Thanks."),
    ]
    assert (listed["count"], listed["total"]) == (2, 2)
    page = call(
        cast.client(cast.morgan), "list_task_comments", task_id=task["id"], offset=1, limit=5
    ).json()
    assert [c["body"] for c in page["comments"]] == ["Thanks."]
    assert (page["count"], page["total"]) == (1, 2)


def test_the_comment_tools_keep_the_rules_of_rest(cast, task):
    boss = cast.client(cast.boss)
    assert_error(
        call(boss, "comment_on_task", task_id=task["id"], body="hi"), 404, "task_not_found"
    )
    assert_error(call(boss, "list_task_comments", task_id=task["id"]), 404, "task_not_found")
    assert_error(
        call(cast.client(cast.alex), "comment_on_task", task_id=task["id"], body=""), 400, "invalid"
    )
    # An organization key reads (a read-only tool) but writes through REST only.
    assert call(cast.human, "list_task_comments", task_id=task["id"]).status_code == 200
    assert_error(
        call(cast.human, "comment_on_task", task_id=task["id"], body="hi"), 403, "read_only_key"
    )


def test_a_comment_and_a_result_reach_webhooks_too(cast, task):
    Agent.objects.filter(pk=cast.morgan.pk).update(webhook_url="https://hooks.example.com/m")
    alex = cast.client(cast.alex)
    comment(alex, task["id"], "Almost there.")
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    post(
        alex,
        f"/api/tasks/{task['id']}/status",
        {"status": "completed", "result": "Migrated.", "result_data": {"rows": 3}},
    )
    payloads = [d.payload for d in WebhookDelivery.objects.order_by("pk")]
    assert [(p["event"], p["agent"]) for p in payloads] == [
        ("task.comment", "agent-morgan"),
        ("task.status_changed", "agent-morgan"),
    ]
    assert payloads[0]["message"] == "agent-alex commented on the task: Almost there."
    assert (payloads[1]["task"]["result"], payloads[1]["task"]["result_data"]) == (
        "Migrated.",
        {"rows": 3},
    )


def test_a_comment_after_a_move_the_caller_did_not_see_records_the_task_as_it_is(cast, task):
    """The comment reads its task under lock, as a move does: the caller's copy, read before a
    human gave the task back to Sarah, must not leave a stale snapshot in the audit trail."""
    stale = Task.objects.get(pk=task["id"])
    response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-sarah"})
    assert response.status_code == 200, response.content
    InboxItem.objects.all().delete()
    services.task_comment(task=stale, actor=Actor.of(caller_for_agent(cast.morgan)), body="Hi")
    events = list(TaskEvent.objects.filter(task_id=task["id"]).order_by("pk"))
    assert events[-1].kind == "comment"
    assert events[-1].before == events[-2].after
    assert events[-1].after["assignee"] == "agent-sarah"
