"""The task tools of the registry run the same services as REST (call-tool door)."""

from tasks.models import Task, TaskEvent
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, post

TOOLS = {
    "create_task",
    "assign_task",
    "delegate_task",
    "queue_task",
    "escalate_task",
    "update_task_status",
    "get_my_tasks",
    "get_inbox",
    "recommend_delegate",
    # issue 11 §1
    "get_task",
    "complete_task",
    "create_subtask",
    "comment_on_task",
    "list_task_comments",
    "cancel_task",
}


def call(client, name, **params):
    return post(client, "/api/agent-engine/call-tool", {"toolName": name, "params": params})


def test_every_task_tool_is_listed(cast):
    names = {t["name"] for t in cast.client(cast.sarah).get("/api/tools").json()}
    assert TOOLS <= names


def test_an_agent_runs_a_task_end_to_end_through_tools(cast):
    sarah, alex = cast.client(cast.sarah), cast.client(cast.alex)
    task = call(
        sarah,
        "create_task",
        title="Index the orders table",
        required_expertise="PostgreSQL",
        agent_id="agent-sarah",
    ).json()
    assert task["assignee"] == "agent-sarah"
    recommendation = call(sarah, "recommend_delegate", expertise="PostgreSQL").json()
    assert recommendation["primary_choice"]["id"] == "agent-alex"
    delegated = call(
        sarah, "delegate_task", task_id=task["id"], agent_id="agent-alex", reasoning="exact match"
    ).json()
    assert delegated["assignee"] == "agent-alex"
    inbox = call(alex, "get_inbox", mark_read=True).json()
    assert [i["kind"] for i in inbox["items"]] == ["delegated"] and inbox["unread"] == 0
    assert (
        call(alex, "update_task_status", task_id=task["id"], status="in_progress").status_code
        == 200
    )
    done = call(alex, "update_task_status", task_id=task["id"], status="completed").json()
    assert done["status"] == "completed"
    mine = call(alex, "get_my_tasks", role="assigned").json()
    assert [t["id"] for t in mine["tasks"]] == [task["id"]]
    assert TaskEvent.objects.filter(task_id=task["id"]).count() == 4


def test_queue_and_escalate_tools(cast):
    sarah = cast.client(cast.sarah)
    give_tasks(cast.morgan, 5)
    task = call(sarah, "create_task", title="Tune MySQL", agent_id="agent-sarah").json()
    queued = call(sarah, "queue_task", task_id=task["id"], agent_id="agent-morgan").json()
    assert queued["queued_for"] == "agent-morgan"
    escalated = call(sarah, "escalate_task", task_id=task["id"], reason="too slow").json()
    assert escalated["assignee"] == "agent-boss"


def test_tool_errors_have_the_same_codes_as_rest(cast):
    sarah = cast.client(cast.sarah)
    give_tasks(cast.alex, 5)
    assert_error(
        call(sarah, "create_task", title="x", agent_id="agent-alex"), 409, "capacity_exceeded"
    )
    assert_error(call(sarah, "assign_task", task_id=999999), 404, "task_not_found")
    assert_error(call(sarah, "create_task", title="x", urgency="soon"), 400, "invalid")


def test_an_organization_key_reads_a_task_through_get_task(cast):
    created = post(cast.human, "/api/tasks", {"title": "x", "agent_id": "agent-alex"}).json()
    shown = call(cast.human, "get_task", task_id=created["id"]).json()
    assert (shown["id"], shown["assignee"], shown["subtasks"]) == (created["id"], "agent-alex", [])
    assert shown == cast.human.get(f"/api/tasks/{created['id']}").json()


def test_an_organization_key_cannot_act_as_an_agent_through_tools(cast):
    assert_error(call(cast.human, "create_task", title="x"), 403, "agent_required")
    response = call(cast.human, "recommend_delegate", expertise="PostgreSQL", agent="agent-sarah")
    assert response.status_code == 200
    assert response.json()["primary_choice"]["id"] == "agent-alex"


def test_cancel_task_keeps_the_rules_of_rest_and_never_cancels_subtasks_silently(cast):
    """Issue 11 §1 over the tool door: the creator cancels (409 for anyone else), and a task with
    open subtasks only with cancel_subtasks, which cancels them with it."""
    sarah, alex = cast.client(cast.sarah), cast.client(cast.alex)
    mine = call(sarah, "create_task", title="Ship it", agent_id="agent-sarah").json()
    part = call(
        sarah, "create_subtask", title="A part", parent=mine["id"], agent_id="agent-alex"
    ).json()
    # Alex holds the subtask but did not create it.
    assert_error(call(alex, "cancel_task", task_id=part["id"]), 409, "invalid_transition")
    assert_error(call(sarah, "cancel_task", task_id=mine["id"]), 409, "open_subtasks")
    assert Task.objects.get(pk=part["id"]).status == "assigned"
    done = call(sarah, "cancel_task", task_id=mine["id"], reason="Scrapped.", cancel_subtasks=True)
    assert done.status_code == 200, done.content
    assert done.json()["status"] == "cancelled"
    assert Task.objects.get(pk=part["id"]).status == "cancelled"
    assert TaskEvent.objects.filter(task_id=part["id"], kind="cancelled").count() == 1
    assert_error(call(sarah, "cancel_task", task_id=mine["id"]), 409, "invalid_transition")
    assert_error(
        call(cast.client(cast.morgan), "cancel_task", task_id=mine["id"]), 404, "task_not_found"
    )
    assert_error(
        call(sarah, "cancel_task", task_id=mine["id"], cancel_subtasks="maybe"), 400, "invalid"
    )
    # It writes: an organization key cancels through REST.
    assert_error(call(cast.human, "cancel_task", task_id=mine["id"]), 403, "read_only_key")
