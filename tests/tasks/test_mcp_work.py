"""Issue 11 §1's tools over MCP (streamable HTTP, the SDK's own client against a live server):
the same registry as call-tool, so the same answers and error codes."""

import pytest

from tasks.models import InboxItem, Task
from tests.factories import make_key
from tests.organization.mcp.live import calls, data, ok, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_splits_finishes_and_discusses_work_over_mcp(live):
    cast, url = live
    sarah, alex = make_key(cast.org, cast.sarah), make_key(cast.org, cast.alex)
    (parent,) = run(
        calls(url, sarah, ("create_task", {"title": "Ship it", "agent_id": "agent-sarah"}))
    )
    parent_id = ok(parent)["id"]

    child, commented = run(
        calls(
            url,
            sarah,
            (
                "create_subtask",
                {"title": "Index the table", "parent": parent_id, "agent_id": "agent-alex"},
            ),
            ("comment_on_task", {"task_id": parent_id, "body": "Alex takes the index."}),
        )
    )
    child = ok(child)
    assert (child["parent"], child["assignee"]) == (parent_id, "agent-alex")
    assert ok(commented)["author"] == "agent-sarah"

    started, done, listed = run(
        calls(
            url,
            alex,
            ("update_task_status", {"task_id": child["id"], "status": "in_progress"}),
            (
                "complete_task",
                {
                    "task_id": child["id"],
                    "result": "Indexed.",
                    "result_data": {"index": "orders_created_at"},
                },
            ),
            ("comment_on_task", {"task_id": child["id"], "body": "Done, see result_data."}),
        )
    )
    assert ok(started)["status"] == "in_progress"
    assert (ok(done)["status"], ok(done)["result"], ok(done)["result_data"]) == (
        "completed",
        "Indexed.",
        {"index": "orders_created_at"},
    )

    shown, comments = run(
        calls(
            url,
            sarah,
            ("get_task", {"task_id": parent_id}),
            ("list_task_comments", {"task_id": child["id"]}),
        )
    )
    shown = ok(shown)
    assert shown["subtasks"] == [
        {
            "id": child["id"],
            "title": "Index the table",
            "status": "completed",
            "assignee": "agent-alex",
            "result": "Indexed.",
        }
    ]
    assert shown["subtask_progress"] == {"done": 1, "total": 1}
    assert [(c["author"], c["body"]) for c in ok(comments)["comments"]] == [
        ("agent-alex", "Done, see result_data.")
    ]
    # What reached Sarah, who holds the parent and created the subtask: the completion, the
    # comment and that her subtasks are done; Alex heard only of what Sarah did.
    assert sorted(cast.sarah.inbox_items.values_list("kind", flat=True)) == [
        "comment",
        "status_changed",
        "subtasks_done",
    ]
    assert sorted(InboxItem.objects.filter(agent=cast.alex).values_list("kind", flat=True)) == [
        "created"
    ]


def test_the_work_tools_answer_the_rest_codes_over_mcp(live):
    cast, url = live
    alex = make_key(cast.org, cast.alex)
    hidden = Task.objects.create(
        organization=cast.org, title="Morgan's", assignee=cast.morgan, status="assigned"
    )
    mine = Task.objects.create(
        organization=cast.org,
        title="Alex's",
        assignee=cast.alex,
        status="assigned",
        created_by_agent=cast.sarah,
    )
    results = run(
        calls(
            url,
            alex,
            ("get_task", {"task_id": hidden.pk}),
            ("create_subtask", {"title": "x", "parent": hidden.pk}),
            ("complete_task", {"task_id": mine.pk, "result": "too early"}),
            ("comment_on_task", {"task_id": mine.pk, "body": ""}),
            ("list_task_comments", {"task_id": hidden.pk}),
        )
    )
    codes = [(data(r)["status"], data(r)["code"]) for r in results]
    assert all(r.is_error for r in results)
    assert codes == [
        (404, "task_not_found"),
        (404, "task_not_found"),
        (409, "invalid_transition"),
        (400, "invalid"),
        (404, "task_not_found"),
    ]
    # Sarah sees Alex's task (she created it) but does not hold it.
    (refused,) = run(
        calls(
            url,
            make_key(cast.org, cast.sarah),
            ("create_subtask", {"title": "x", "parent": mine.pk}),
        )
    )
    assert (data(refused)["status"], data(refused)["code"]) == (403, "parent_not_held")
