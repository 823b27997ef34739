"""Which tasks an agent sees, and the task list's filters and queries."""

from tasks.models import Task
from tests.factories import give_tasks
from tests.tasks.conftest import assert_error, create, post


def test_an_agent_sees_only_its_own_tasks(cast):
    mine = create(cast.client(cast.sarah), agent_id="agent-alex").json()
    passed = create(cast.human, agent_id="agent-morgan").json()
    post(
        cast.client(cast.morgan), f"/api/tasks/{passed['id']}/delegate", {"agent_id": "agent-sarah"}
    )
    hidden = create(cast.human, agent_id="agent-boss").json()
    sarah = cast.client(cast.sarah)
    listed = {t["id"] for t in sarah.get("/api/tasks").json()["results"]}
    assert listed == {mine["id"], passed["id"]}
    assert_error(sarah.get(f"/api/tasks/{hidden['id']}"), 404, "task_not_found")
    assert_error(sarah.get(f"/api/tasks/{hidden['id']}/events"), 404, "task_not_found")
    assert_error(sarah.get("/api/tasks/not-a-number"), 404, "task_not_found")
    assert len(cast.human.get("/api/tasks").json()["results"]) == 3


def test_a_move_answers_404_for_a_task_it_cannot_see_before_anything_else(cast):
    """Moves read their task under the lock, after the body: the order of answers is kept."""
    hidden = create(cast.human, agent_id="agent-boss").json()["id"]
    sarah = cast.client(cast.sarah)
    for path, body in [
        ("status", {"status": "bogus"}),
        ("assign", {"agent_id": "agent-nobody"}),
        ("assign", {"agentId": "agent-alex"}),  # names another agent: 403 were it visible
        ("delegate", {}),
    ]:
        assert_error(post(sarah, f"/api/tasks/{hidden}/{path}", body), 404, "task_not_found")
    mine = create(sarah).json()["id"]
    assert_error(post(sarah, f"/api/tasks/{mine}/status", {"status": "bogus"}), 400, "invalid")
    assert_error(
        post(sarah, f"/api/tasks/{mine}/assign", {"agent_id": "agent-nobody"}),
        404,
        "agent_not_found",
    )
    # A human cannot delegate (403), but an unknown agent is still a 404 first.
    assert_error(
        post(cast.human, f"/api/tasks/{mine}/delegate", {"agent_id": "agent-nobody"}),
        404,
        "agent_not_found",
    )
    assert_error(
        post(cast.human, f"/api/tasks/{mine}/delegate", {"agent_id": "agent-alex"}),
        403,
        "agent_required",
    )


def test_a_delegator_still_sees_the_task_it_passed_on(cast):
    task = create(cast.human, agent_id="agent-sarah").json()
    post(cast.client(cast.sarah), f"/api/tasks/{task['id']}/delegate", {"agent_id": "agent-alex"})
    assert cast.client(cast.sarah).get(f"/api/tasks/{task['id']}").status_code == 200


def test_list_filters(cast):
    create(cast.human, agent_id="agent-alex", urgency="high", required_expertise="PostgreSQL")
    create(
        cast.client(cast.sarah), agent_id="agent-sarah", urgency="low", required_expertise="React"
    )
    create(cast.human)

    def ids(query):
        response = cast.human.get(f"/api/tasks?{query}")
        assert response.status_code == 200, response.content
        return sorted(t["title"] + ":" + (t["assignee"] or "-") for t in response.json()["results"])

    assert ids("assignee=agent-alex") == ["A task:agent-alex"]
    assert ids("status=queued") == ["A task:-"]
    Task.objects.filter(status="queued").update(queued_for=cast.morgan)
    assert ids("queued_for=agent-morgan") == ["A task:-"]
    assert ids("queued_for=agent-alex") == []
    assert ids("urgency=low") == ["A task:agent-sarah"]
    assert (
        ids("required_expertise=PostgreSQL") == ids("expertise=PostgreSQL") == ["A task:agent-alex"]
    )
    assert (
        ids("created_by_agent=agent-sarah")
        == ids("created_by=agent-sarah")
        == ["A task:agent-sarah"]
    )
    assert_error(cast.human.get("/api/tasks?status=sleeping"), 400, "invalid")


def test_list_query_count_does_not_grow_with_tasks(cast, django_assert_max_num_queries):
    give_tasks(cast.morgan, 5)
    for _ in range(10):
        task = create(cast.human).json()
        post(cast.human, f"/api/tasks/{task['id']}/queue", {"agent_id": "agent-morgan"})
    client = cast.human
    with django_assert_max_num_queries(8):
        response = client.get("/api/tasks?status=queued")
    waits = [t["estimated_wait_seconds"] for t in response.json()["results"]]
    assert sorted(waits) == [720 * n for n in range(1, 11)]
