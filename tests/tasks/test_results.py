"""Issue 11 §1, results: completing or failing a task takes `result` and `result_data`, over
REST and the tools; the task shows them; its creator and delegator are told, never the actor."""

import pytest

from tasks.models import RESULT_DATA_MAX_BYTES, RESULT_MAX_LENGTH, InboxItem, Task
from tests.tasks.conftest import assert_error, create, post
from tests.tasks.test_tools import call


def in_progress(cast, agent) -> dict:
    """A task the human creates for `agent`, already in progress."""
    task = create(cast.human, agent_id=agent.handle).json()
    response = post(
        cast.client(agent), f"/api/tasks/{task['id']}/status", {"status": "in_progress"}
    )
    assert response.status_code == 200, response.content
    return task


def test_completing_with_a_result_stores_it_and_get_shows_it(cast):
    alex = cast.client(cast.alex)
    task = in_progress(cast, cast.alex)
    body = {
        "status": "completed",
        "result": "Indexed orders.created_at; p95 from 900 to 40 ms.",
        "result_data": {"index": "orders_created_at", "p95_ms": [900, 40]},
    }
    response = post(alex, f"/api/tasks/{task['id']}/status", body)
    assert response.status_code == 200, response.content
    assert response.json()["result"] == body["result"]
    assert response.json()["result_data"] == body["result_data"]
    shown = alex.get(f"/api/tasks/{task['id']}").json()
    assert (shown["status"], shown["result"], shown["result_data"]) == (
        "completed",
        body["result"],
        body["result_data"],
    )
    stored = Task.objects.get(pk=task["id"])
    assert (stored.result, stored.result_data) == (body["result"], body["result_data"])


def test_failing_takes_a_result_too(cast):
    task = in_progress(cast, cast.alex)
    response = post(
        cast.client(cast.alex),
        f"/api/tasks/{task['id']}/status",
        {"status": "failed", "result": "The table is locked by a migration."},
    )
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["result"]) == (
        "failed",
        "The table is locked by a migration.",
    )
    assert response.json()["result_data"] is None


def test_an_open_task_has_an_empty_result(cast):
    task = create(cast.human, agent_id="agent-alex").json()
    assert (task["result"], task["result_data"]) == ("", None)


@pytest.mark.parametrize("status", ["in_progress", "blocked"])
def test_a_result_with_any_other_status_is_400(cast, status):
    task = (
        in_progress(cast, cast.alex)
        if status == "blocked"
        else create(cast.human, agent_id="agent-alex").json()
    )
    alex = cast.client(cast.alex)
    for extra in ({"result": "half done"}, {"result_data": {"x": 1}}):
        response = post(alex, f"/api/tasks/{task['id']}/status", {"status": status, **extra})
        assert_error(response, 400, "invalid", "result")
    assert Task.objects.get(pk=task["id"]).result == ""


def test_result_limits_and_shape_are_400(cast):
    task = in_progress(cast, cast.alex)
    alex, path = cast.client(cast.alex), f"/api/tasks/{task['id']}/status"
    too_long = {"status": "completed", "result": "x" * (RESULT_MAX_LENGTH + 1)}
    assert_error(post(alex, path, too_long), 400, "invalid", "result")
    not_an_object = {"status": "completed", "result_data": [1, 2]}
    assert_error(post(alex, path, not_an_object), 400, "invalid", "result_data")
    too_big = {"status": "completed", "result_data": {"blob": "x" * RESULT_DATA_MAX_BYTES}}
    assert_error(post(alex, path, too_big), 400, "invalid", "result_data")
    assert Task.objects.get(pk=task["id"]).status == "in_progress"
    exactly = {"status": "completed", "result": "x" * RESULT_MAX_LENGTH}
    assert post(alex, path, exactly).status_code == 200


def test_the_creator_and_the_delegator_are_told_never_the_actor(cast):
    # Morgan creates it for Sarah, Sarah delegates it to Alex, Alex finishes it.
    task = create(cast.client(cast.morgan), agent_id="agent-sarah").json()
    sarah, alex = cast.client(cast.sarah), cast.client(cast.alex)
    assert (
        post(sarah, f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"}).status_code
        == 200
    )
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "completed", "result": "Shipped it."})

    told = InboxItem.objects.filter(task_id=task["id"], kind="status_changed")
    assert sorted(told.values_list("agent__handle", flat=True)) == ["agent-morgan", "agent-sarah"]
    assert all("Result: Shipped it." in item.message for item in told)
    assert all("in_progress → completed" in item.message for item in told)
    # Alex, who acted, is told nothing of its own completion; nobody hears of in_progress.
    assert not InboxItem.objects.filter(agent=cast.alex, kind="status_changed").exists()
    inbox = cast.client(cast.morgan).get("/api/inbox").json()["results"]
    assert [(i["kind"], i["task"]["status"], i["actor"]) for i in inbox] == [
        ("status_changed", "completed", "agent-alex"),
    ]


def test_an_agent_finishing_its_own_task_tells_nobody(cast):
    sarah = cast.client(cast.sarah)
    task = create(sarah, agent_id="agent-sarah").json()
    post(sarah, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    post(sarah, f"/api/tasks/{task['id']}/status", {"status": "failed", "result": "no"})
    assert not InboxItem.objects.filter(task_id=task["id"]).exists()


def test_a_creator_who_also_delegated_is_told_once(cast):
    sarah, alex = cast.client(cast.sarah), cast.client(cast.alex)
    task = create(sarah, agent_id="agent-alex").json()
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    post(alex, f"/api/tasks/{task['id']}/status", {"status": "completed"})
    told = InboxItem.objects.filter(task_id=task["id"], kind="status_changed")
    assert list(told.values_list("agent__handle", flat=True)) == ["agent-sarah"]


# --- the tools ---------------------------------------------------------------------------------


def test_update_task_status_takes_the_result_too(cast):
    task = in_progress(cast, cast.alex)
    response = call(
        cast.client(cast.alex),
        "update_task_status",
        task_id=task["id"],
        status="completed",
        result="done",
        result_data={"ok": True},
    )
    assert response.status_code == 200, response.content
    assert (response.json()["result"], response.json()["result_data"]) == ("done", {"ok": True})


def test_complete_task_completes_by_default_and_fails_on_request(cast):
    alex = cast.client(cast.alex)
    first, second = in_progress(cast, cast.alex), in_progress(cast, cast.alex)
    done = call(
        alex, "complete_task", task_id=first["id"], result="It works.", result_data={"pr": 42}
    )
    assert done.status_code == 200, done.content
    assert (done.json()["status"], done.json()["result"], done.json()["result_data"]) == (
        "completed",
        "It works.",
        {"pr": 42},
    )
    failed = call(alex, "complete_task", task_id=second["id"], status="failed", result="Blocked.")
    assert (failed.json()["status"], failed.json()["result"]) == ("failed", "Blocked.")
    shown = call(alex, "get_task", task_id=first["id"]).json()
    assert (shown["result"], shown["result_data"]) == ("It works.", {"pr": 42})


def test_complete_task_keeps_the_lifecycle_and_its_codes(cast):
    alex = cast.client(cast.alex)
    task = create(cast.human, agent_id="agent-alex").json()
    assert_error(call(alex, "complete_task", task_id=task["id"]), 409, "invalid_transition")
    assert_error(
        call(alex, "complete_task", task_id=task["id"], status="in_progress"), 400, "invalid"
    )
    assert_error(
        call(cast.client(cast.sarah), "complete_task", task_id=task["id"]), 404, "task_not_found"
    )
    assert_error(call(alex, "complete_task", task_id=task["id"], result_data="x"), 400, "invalid")
    assert Task.objects.get(pk=task["id"]).status == "assigned"


@pytest.mark.parametrize("wanted", ["blocked", "completed", "failed"])
def test_a_human_moving_the_task_an_agent_holds_tells_its_holder(cast, wanted):
    # Morgan created it for Alex; a human moves it: Alex holds it and must stop or adapt,
    # not learn of it from the 409 of its next move (rule 8), and is not woken to act.
    task = create(cast.client(cast.morgan), agent_id="agent-alex").json()
    post(cast.client(cast.alex), f"/api/tasks/{task['id']}/status", {"status": "in_progress"})
    response = post(cast.human, f"/api/tasks/{task['id']}/status", {"status": wanted})
    assert response.status_code == 200, response.content

    told = InboxItem.objects.filter(task_id=task["id"], kind="status_changed")
    expected = ["agent-alex"] if wanted == "blocked" else ["agent-alex", "agent-morgan"]
    assert sorted(told.values_list("agent__handle", flat=True)) == expected
    assert all(f"in_progress → {wanted}" in item.message for item in told)


@pytest.mark.parametrize("door", ["rest", "update_task_status", "complete_task"])
@pytest.mark.parametrize("status", ["completed", "failed"])
def test_null_for_an_optional_field_of_a_status_move_is_not_given_at_every_door(cast, door, status):
    # A strict-mode tool client sends null for each optional param it leaves out; REST takes the
    # same null with the same meaning ("inputs defined once"): no result_data, no result, no note.
    task = in_progress(cast, cast.alex)
    alex = cast.client(cast.alex)
    body = {"status": status, "result": None, "result_data": None, "note": None}
    if door == "rest":
        response = post(alex, f"/api/tasks/{task['id']}/status", body)
    else:
        response = call(alex, door, task_id=task["id"], **body)
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["result"]) == (status, "")
    assert response.json()["result_data"] is None
    stored = Task.objects.get(pk=task["id"])
    assert (stored.result, stored.result_data) == ("", None)


@pytest.mark.parametrize("door", ["rest", "update_task_status"])
def test_null_result_data_with_a_status_that_takes_none_is_not_given_either(cast, door):
    task = create(cast.human, agent_id="agent-alex").json()
    body = {"status": "in_progress", "result": None, "result_data": None, "note": None}
    alex = cast.client(cast.alex)
    if door == "rest":
        response = post(alex, f"/api/tasks/{task['id']}/status", body)
    else:
        response = call(alex, door, task_id=task["id"], **body)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "in_progress"


def test_the_rest_schema_says_the_status_moves_optional_fields_are_nullable(client):
    schema = client.get("/api/schema/?format=json").json()
    body = schema["paths"]["/api/tasks/{id}/status"]["post"]["requestBody"]["content"]
    ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    fields = schema["components"]["schemas"][ref]["properties"]
    assert all(fields[name].get("nullable") for name in ("result", "result_data", "note"))


@pytest.mark.parametrize("door", ["rest", "create_task"])
def test_null_for_an_optional_field_of_a_new_task_is_not_given_at_every_door(cast, door):
    # POST /api/tasks answered 400 "may not be null" where create_task dropped the null.
    body = {
        "title": "Nulls",
        "description": None,
        "required_expertise": None,
        "urgency": None,
        "deadline": None,
        "agent_id": "agent-alex",
        "parent": None,
    }
    morgan = cast.client(cast.morgan)
    if door == "rest":
        response = post(morgan, "/api/tasks", body)
    else:
        response = call(morgan, door, **body)
    assert response.status_code in (200, 201), response.content
    stored = Task.objects.get(pk=response.json()["id"])
    assert (stored.description, stored.required_expertise, stored.urgency) == ("", "", "normal")


@pytest.mark.parametrize("door", ["rest", "cancel_task"])
def test_cancel_subtasks_null_is_not_given_at_every_door(cast, door):
    task = create(cast.client(cast.morgan), agent_id="agent-alex").json()
    morgan = cast.client(cast.morgan)
    body = {"reason": None, "cancel_subtasks": None}
    if door == "rest":
        response = post(morgan, f"/api/tasks/{task['id']}/cancel", body)
    else:
        response = call(morgan, door, task_id=task["id"], **body)
    assert response.status_code == 200, response.content
    assert Task.objects.get(pk=task["id"]).status == "cancelled"
