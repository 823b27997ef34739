"""Issue 11 §1, subtasks: `parent` on POST /api/tasks (who may), the parent's `subtasks` and
`subtask_progress`, `?parent=`, `subtasks_done` once the last open one finishes, and cancelling
a parent with (or without) its open subtasks."""

import pytest
from django.db import IntegrityError, transaction

from tasks.models import SUBTASKS_LISTED, InboxItem, Task, TaskEvent
from tasks.rules import SYSTEM
from tasks.services import task_create
from tests.factories import give_tasks, make_admin_user, make_agent, make_org
from tests.tasks.conftest import assert_error, create, post
from tests.tasks.test_query_counts import used_just_now


@pytest.fixture
def parent(cast):
    """A task the human gave Sarah."""
    return create(cast.human, title="Ship the checkout", agent_id="agent-sarah").json()


def subtask(client, parent_id, **body):
    response = create(client, parent=parent_id, **body)
    assert response.status_code == 201, response.content
    return response.json()


def finish(cast, agent, task_id, status="completed", result=""):
    client = cast.client(agent)
    post(client, f"/api/tasks/{task_id}/status", {"status": "in_progress"})
    response = post(client, f"/api/tasks/{task_id}/status", {"status": status, "result": result})
    assert response.status_code == 200, response.content


def subtasks_done(parent_id):
    return InboxItem.objects.filter(task_id=parent_id, kind="subtasks_done")


# --- who may add a subtask ---------------------------------------------------------------------


def test_the_holder_adds_a_subtask_and_it_is_a_task_like_any_other(cast, parent):
    response = create(
        cast.client(cast.sarah),
        title="Write the tests",
        parent=parent["id"],
        agent_id="agent-alex",
        urgency="high",
    )
    assert response.status_code == 201, response.content
    child = response.json()
    assert (child["parent"], child["status"], child["assignee"], child["created_by_agent"]) == (
        parent["id"],
        "assigned",
        "agent-alex",
        "agent-sarah",
    )
    assert child["delegation_chain"] == ["agent-sarah", "agent-alex"]
    assert InboxItem.objects.get(task_id=child["id"]).agent == cast.alex


def test_the_assignment_rules_apply_to_a_subtask(cast, parent):
    sarah = cast.client(cast.sarah)
    give_tasks(cast.alex, 5)
    response = create(sarah, parent=parent["id"], agent_id="agent-alex")
    assert_error(response, 409, "capacity_exceeded")
    cast.enforce()
    assert_error(create(sarah, parent=parent["id"], agent_id="agent-morgan"), 403, "role_forbidden")
    assert not Task.objects.filter(parent_id=parent["id"]).exists()


def test_an_agent_that_sees_the_parent_but_does_not_hold_it_is_403(cast):
    # Sarah created it (so she sees it), but Alex holds it.
    theirs = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    response = create(cast.client(cast.sarah), parent=theirs["id"])
    assert_error(response, 403, "parent_not_held", "held by agent-alex")


def test_an_agent_that_cannot_see_the_parent_gets_404(cast, parent):
    assert_error(create(cast.client(cast.morgan), parent=parent["id"]), 404, "task_not_found")
    assert_error(create(cast.client(cast.morgan), parent=999_999_999), 404, "task_not_found")


def test_a_human_key_adds_a_subtask_to_any_task_of_its_organization(cast):
    queued = create(cast.human, title="Nobody holds this").json()
    child = subtask(cast.human, queued["id"], agent_id="agent-morgan")
    assert (child["parent"], child["created_by_agent"]) == (queued["id"], None)


def test_another_organizations_parent_is_404(cast):
    other = make_org("elsewhere")
    stranger = make_agent(other, "agent-stranger")
    foreign = task_create(org=other, actor=SYSTEM, title="theirs", assignee=stranger)
    assert_error(create(cast.human, parent=foreign.pk), 404, "task_not_found")
    assert_error(create(cast.client(cast.sarah), parent=foreign.pk), 404, "task_not_found")
    assert not Task.objects.filter(parent=foreign).exists()


def test_a_finished_parent_takes_no_subtasks(cast, parent):
    finish(cast, cast.sarah, parent["id"])
    assert_error(create(cast.client(cast.sarah), parent=parent["id"]), 409, "parent_finished")
    assert_error(create(cast.human, parent=parent["id"]), 409, "parent_finished")


@pytest.mark.parametrize("bad", ["abc", 0, -1, 1.5, True])
def test_a_parent_that_is_no_id_is_400(cast, bad):
    assert_error(create(cast.human, parent=bad), 400, "invalid", "parent")


def test_a_task_can_never_be_its_own_parent(cast, parent):
    # The API sets a parent once, at creation; the database refuses the one cycle a write
    # elsewhere could make.
    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.filter(pk=parent["id"]).update(parent_id=parent["id"])


# --- what the parent shows ----------------------------------------------------------------------


def test_the_parent_lists_its_subtasks_and_their_progress(cast, parent):
    sarah = cast.client(cast.sarah)
    first = subtask(sarah, parent["id"], title="Backend", agent_id="agent-alex")
    second = subtask(sarah, parent["id"], title="Frontend", agent_id="agent-sarah")
    third = subtask(sarah, parent["id"], title="Docs")
    finish(cast, cast.alex, first["id"], result="API done")
    shown = sarah.get(f"/api/tasks/{parent['id']}").json()
    assert shown["parent"] is None
    assert shown["subtasks"] == [
        {
            "id": first["id"],
            "title": "Backend",
            "status": "completed",
            "assignee": "agent-alex",
            "result": "API done",
        },
        {
            "id": second["id"],
            "title": "Frontend",
            "status": "assigned",
            "assignee": "agent-sarah",
            "result": "",
        },
        {"id": third["id"], "title": "Docs", "status": "queued", "assignee": None, "result": ""},
    ]
    assert shown["subtask_progress"] == {"done": 1, "total": 3}
    child = cast.client(cast.alex).get(f"/api/tasks/{first['id']}").json()
    assert (child["parent"], child["subtasks"], child["subtask_progress"]) == (
        parent["id"],
        [],
        {"done": 0, "total": 0},
    )


def test_the_detail_lists_a_bounded_number_but_counts_them_all(cast, parent):
    for n in range(SUBTASKS_LISTED + 2):
        Task.objects.create(organization=cast.org, title=f"s{n}", parent_id=parent["id"])
    shown = cast.human.get(f"/api/tasks/{parent['id']}").json()
    assert len(shown["subtasks"]) == SUBTASKS_LISTED
    assert shown["subtasks"][0]["title"] == "s0"
    assert shown["subtask_progress"] == {"done": 0, "total": SUBTASKS_LISTED + 2}


@pytest.mark.postgres
@pytest.mark.parametrize("count", [1, 30])
def test_getting_a_task_costs_the_same_queries_whatever_its_subtasks(
    cast, parent, count, django_assert_max_num_queries
):
    for n in range(count):
        holder = [cast.alex, cast.morgan, None][n % 3]
        Task.objects.create(
            organization=cast.org,
            title=f"s{n}",
            parent_id=parent["id"],
            assignee=holder,
            status="assigned" if holder else "queued",
        )
    sarah = cast.client(cast.sarah)
    used_just_now()
    # The key; the task with its agents; its subtasks with their holders and the progress; the
    # cost of the whole tree (one recursive statement, costs.sql.task_tree_cost).
    with django_assert_max_num_queries(4):
        response = sarah.get(f"/api/tasks/{parent['id']}")
    assert response.status_code == 200
    assert len(response.json()["subtasks"]) == count


def test_the_list_filters_by_parent(cast, parent):
    sarah = cast.client(cast.sarah)
    mine = [subtask(sarah, parent["id"], title=f"part {n}")["id"] for n in range(3)]
    create(sarah, title="unrelated")
    listed = sarah.get(f"/api/tasks?parent={parent['id']}").json()
    assert sorted(t["id"] for t in listed["results"]) == sorted(mine)
    assert listed["count"] == 3
    assert cast.human.get(f"/api/tasks?parent={mine[0]}").json()["count"] == 0
    # An agent lists only the subtasks it may see, as everywhere.
    assert cast.client(cast.morgan).get(f"/api/tasks?parent={parent['id']}").json()["count"] == 0
    assert_error(sarah.get("/api/tasks?parent=abc"), 400, "invalid", "parent")
    assert_error(sarah.get(f"/api/tasks?parent={2**64}"), 400, "invalid", "parent")


# --- subtasks_done ------------------------------------------------------------------------------


def test_the_holder_is_told_once_when_the_last_open_subtask_finishes(cast, parent):
    sarah = cast.client(cast.sarah)
    a = subtask(sarah, parent["id"], agent_id="agent-alex")
    b = subtask(sarah, parent["id"], agent_id="agent-morgan")
    c = subtask(sarah, parent["id"], title="Maybe later")
    finish(cast, cast.alex, a["id"])
    finish(cast, cast.morgan, b["id"], status="failed")
    assert not subtasks_done(parent["id"]).exists()
    # Cancelled counts as finished: the last open one goes, Sarah is told.
    assert post(cast.human, f"/api/tasks/{c['id']}/cancel", {}).status_code == 200
    item = subtasks_done(parent["id"]).get()
    assert item.agent == cast.sarah
    assert item.message.startswith(
        "All 3 subtask(s) of the task are finished (1 completed, 1 failed, 1 cancelled)"
    )
    inbox = sarah.get("/api/inbox?unread=true").json()["results"]
    assert [(i["kind"], i["task"]["id"]) for i in inbox][0] == ("subtasks_done", parent["id"])
    assert TaskEvent.objects.filter(task_id=parent["id"], kind="subtasks_done").count() == 1
    # Nothing more happens to finished subtasks; a new round is told again.
    d = subtask(sarah, parent["id"], agent_id="agent-alex")
    assert subtasks_done(parent["id"]).count() == 1
    finish(cast, cast.alex, d["id"])
    assert subtasks_done(parent["id"]).count() == 2


def test_the_holder_who_finishes_the_last_subtask_itself_is_not_told(cast, parent):
    sarah = cast.client(cast.sarah)
    only = subtask(sarah, parent["id"], agent_id="agent-sarah")
    finish(cast, cast.sarah, only["id"])
    assert TaskEvent.objects.filter(task_id=parent["id"], kind="subtasks_done").count() == 1
    assert not subtasks_done(parent["id"]).exists()


def test_a_finished_parent_hears_nothing_more_of_its_subtasks(cast, parent):
    only = subtask(cast.client(cast.sarah), parent["id"], agent_id="agent-alex")
    finish(cast, cast.sarah, parent["id"])  # completing a parent leaves its subtasks open
    assert Task.objects.get(pk=only["id"]).status == "assigned"
    finish(cast, cast.alex, only["id"])
    assert not TaskEvent.objects.filter(task_id=parent["id"], kind="subtasks_done").exists()


# --- cancelling a parent ------------------------------------------------------------------------


def test_cancelling_a_parent_with_open_subtasks_needs_the_flag(cast, parent):
    subtask(cast.human, parent["id"], agent_id="agent-alex")
    response = post(cast.human, f"/api/tasks/{parent['id']}/cancel", {"reason": "scrapped"})
    assert_error(response, 409, "open_subtasks", "cancel_subtasks")
    assert set(Task.objects.filter(organization=cast.org).values_list("status", flat=True)) == {
        "assigned"
    }
    assert not TaskEvent.objects.filter(kind="cancelled").exists()


def test_cancelling_with_the_flag_cancels_every_open_subtask_at_any_depth(cast, parent):
    sarah = cast.client(cast.sarah)
    done = subtask(sarah, parent["id"], title="done", agent_id="agent-alex")
    held = subtask(sarah, parent["id"], title="held", agent_id="agent-morgan")
    waiting = subtask(sarah, parent["id"], title="waiting")
    # A completed subtask may still have open ones of its own.
    deeper = subtask(cast.human, done["id"], title="deeper", agent_id="agent-boss")
    finish(cast, cast.alex, done["id"])
    # Morgan is full once the cascade frees her: a task waits in her queue.
    give_tasks(cast.morgan, 4)
    queued = task_create(org=cast.org, actor=SYSTEM, title="in line")
    Task.objects.filter(pk=queued.pk).update(queued_for=cast.morgan)

    response = post(
        cast.human,
        f"/api/tasks/{parent['id']}/cancel",
        {"reason": "scrapped", "cancel_subtasks": True},
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    status = dict(Task.objects.values_list("title", "status"))
    assert (
        status["Ship the checkout"],
        status["done"],
        status["held"],
        status["waiting"],
        status["deeper"],
    ) == ("cancelled", "completed", "cancelled", "cancelled", "cancelled")
    for child in (held["id"], waiting["id"], deeper["id"]):
        event = TaskEvent.objects.filter(task_id=child).latest("pk")
        assert (event.kind, event.actor_kind) == ("cancelled", "user")
        assert f"with its parent task #{parent['id']}" in event.message
        assert event.message.endswith("scrapped")
    # Morgan's freed slot goes to her queue, as after any cancellation.
    assert Task.objects.get(pk=queued.pk).assignee == cast.morgan
    # Nobody is told the cancelled parent's subtasks are done.
    assert not TaskEvent.objects.filter(kind="subtasks_done").exists()


def test_an_agent_creator_cancels_its_task_with_its_subtasks(cast):
    sarah = cast.client(cast.sarah)
    mine = create(sarah, agent_id="agent-sarah").json()
    child = subtask(sarah, mine["id"], agent_id="agent-alex")
    assert_error(post(sarah, f"/api/tasks/{mine['id']}/cancel", {}), 409, "open_subtasks")
    response = post(sarah, f"/api/tasks/{mine['id']}/cancel", {"cancel_subtasks": True})
    assert response.status_code == 200
    assert Task.objects.get(pk=child["id"]).status == "cancelled"
    # Only the creator or a human cancels, subtasks or not.
    other = create(cast.human, agent_id="agent-alex").json()
    assert_error(
        post(cast.client(cast.alex), f"/api/tasks/{other['id']}/cancel", {"cancel_subtasks": True}),
        409,
        "invalid_transition",
    )


def test_a_parent_with_only_finished_subtasks_cancels_without_the_flag(cast, parent):
    child = subtask(cast.client(cast.sarah), parent["id"], agent_id="agent-alex")
    finish(cast, cast.alex, child["id"])
    response = post(cast.human, f"/api/tasks/{parent['id']}/cancel", {})
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"


def test_a_cancelled_subtask_of_a_subtask_tells_the_grandparent_holder(cast, parent):
    """Cancelling a subtask (with its own subtasks) finishes it: its parent may be done."""
    sarah = cast.client(cast.sarah)
    middle = subtask(sarah, parent["id"], title="middle")
    subtask(cast.human, middle["id"], title="leaf", agent_id="agent-alex")
    response = post(sarah, f"/api/tasks/{middle['id']}/cancel", {"cancel_subtasks": True})
    assert response.status_code == 200, response.content
    assert Task.objects.get(title="leaf").status == "cancelled"
    # Sarah cancelled it herself: the event is kept, no inbox item.
    assert TaskEvent.objects.filter(task_id=parent["id"], kind="subtasks_done").count() == 1
    assert not subtasks_done(parent["id"]).exists()


def test_the_admin_cancels_with_subtasks_only_when_asked(cast, parent, client):
    subtask(cast.human, parent["id"], agent_id="agent-alex")
    client.force_login(make_admin_user(cast.org))
    client.post(
        "/admin/tasks/task/", {"action": "cancel_tasks", "_selected_action": [parent["id"]]}
    )
    assert Task.objects.get(pk=parent["id"]).status == "assigned"
    client.post(
        "/admin/tasks/task/",
        {"action": "cancel_tasks_with_subtasks", "_selected_action": [parent["id"]]},
    )
    assert set(Task.objects.filter(organization=cast.org).values_list("status", flat=True)) == {
        "cancelled"
    }
