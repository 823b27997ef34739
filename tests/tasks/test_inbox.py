"""GET /api/inbox: what reached the calling agent, newest first, read/unread; never its own act."""

from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


def kinds(client, query=""):
    response = client.get(f"/api/inbox{query}")
    assert response.status_code == 200, response.content
    return [(i["kind"], i["task"]["id"], i["read"]) for i in response.json()["results"]]


def test_assigned_delegated_queued_and_escalated_work_reaches_the_inbox(cast):
    first = create(cast.human, agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{first['id']}/delegate", {"agent_id": "agent-alex"})
    second = create(cast.human).json()
    give_tasks(cast.boss, 5)
    post(cast.human, f"/api/tasks/{second['id']}/queue", {"agent_id": "agent-boss"})
    third = create(cast.human, agent_id="agent-alex").json()
    post(cast.client(cast.alex), f"/api/tasks/{third['id']}/escalate", {})

    assert kinds(cast.client(cast.alex)) == [
        ("created", third["id"], False),
        ("delegated", first["id"], False),
    ]
    assert kinds(cast.client(cast.sarah)) == [("created", first["id"], False)]
    assert kinds(cast.client(cast.boss)) == [
        ("escalated", third["id"], False),
        ("queued", second["id"], False),
    ]


def test_an_agent_is_not_woken_by_what_it_did_itself(cast):
    create(cast.client(cast.sarah), agent_id="agent-sarah")
    assert kinds(cast.client(cast.sarah)) == []


def test_read_and_unread(cast):
    a = create(cast.human, agent_id="agent-alex").json()
    b = create(cast.human, agent_id="agent-alex").json()
    alex = cast.client(cast.alex)
    items = alex.get("/api/inbox").json()["results"]
    response = post(alex, f"/api/inbox/{items[1]['id']}/read")
    assert response.status_code == 200 and response.json()["read"] is True
    assert kinds(alex, "?unread=true") == [("created", b["id"], False)]
    assert kinds(alex, "?unread=false") == [("created", a["id"], True)]
    assert post(alex, "/api/inbox/read", {}).json() == {"success": True, "marked": 1}
    assert kinds(alex, "?unread=true") == []


def test_someone_elses_inbox_item_is_404(cast):
    create(cast.human, agent_id="agent-alex")
    item = cast.client(cast.alex).get("/api/inbox").json()["results"][0]
    assert_error(
        post(cast.client(cast.sarah), f"/api/inbox/{item['id']}/read"), 404, "inbox_item_not_found"
    )


def test_the_inbox_needs_an_agent_key(cast):
    assert_error(cast.human.get("/api/inbox"), 403, "agent_required")
