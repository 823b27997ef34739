"""`GET /api/runs` and `GET /api/runs/<id>` (issue 11 §2): a record a human can read. An agent
sees its own runs, a human all of its organization's; anything else is 404."""

from datetime import datetime

import pytest

from runtime.models import Run
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.runtime.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worked(cast, offline):
    """Lena delegated a React task to Sarah, who completed it: two runs."""
    task = cast.assign(cast.lena, "Build the page", required_expertise="React")
    lena_run, sarah_run = drain()
    return task, Run.objects.get(pk=lena_run), Run.objects.get(pk=sarah_run)


def client_of(cast, agent=None) -> KeyClient:
    return KeyClient(make_key(cast.org if agent is None else agent.organization, agent))


def test_a_run_reads_as_its_record(cast, worked):
    task, lena_run, _ = worked
    body = client_of(cast).get(f"/api/runs/{lena_run.pk}").json()
    assert (body["id"], body["agent"], body["task"], body["trigger"], body["status"]) == (
        lena_run.pk,
        "agent-lena",
        task.pk,
        "created",
        "completed",
    )
    assert body["triggers"][0] | {"created_at": None} == {
        "trigger": "created",
        "task": task.pk,
        "woken_by": None,
        "created_at": None,
    }
    assert body["error"] == "" and body["attempts"] == 1
    assert body["started_at"] and body["finished_at"] and body["created_at"]
    assert (body["prompt_tokens"], body["completion_tokens"], body["tokens_used"]) == (0, 0, 0)
    assert (body["provider"], body["model"], body["max_turns"]) == ("offline", "offline", 8)
    calls = [t for t in body["turns"] if t["kind"] == "tool_call"]
    assert [(c["name"], c["status"]) for c in calls] == [
        ("recommend_delegate", "ok"),
        ("delegate_task", "ok"),
    ]
    assert calls[0]["arguments"]["expertise"] == "React"
    assert calls[1]["result"]["assignee"] == "agent-sarah"
    assert all(c["ms"] >= 0 for c in calls)  # how long each call ran
    # ... and when each started: within the run, in the order the calls were made.
    starts = [datetime.fromisoformat(c["started_at"]) for c in calls]
    assert datetime.fromisoformat(body["started_at"]) <= starts[0] <= starts[1]
    assert starts[1] <= datetime.fromisoformat(body["finished_at"])
    assert "YOUR ORGANIZATIONAL CONTEXT" in body["system_prompt"]
    assert "Build the page" in body["input"]


def test_runs_filter_by_agent_task_and_status(cast, worked):
    task, lena_run, sarah_run = worked
    client = client_of(cast)
    ids = lambda **q: [r["id"] for r in client.get("/api/runs", q).json()["results"]]  # noqa: E731
    assert ids() == [sarah_run.pk, lena_run.pk]
    assert ids(agent="agent-sarah") == [sarah_run.pk]
    assert ids(task=task.pk) == [sarah_run.pk, lena_run.pk]
    assert ids(status="failed") == []
    assert ids(status="completed", agent="agent-lena") == [lena_run.pk]
    listed = client.get("/api/runs").json()["results"][0]
    assert listed["turns"] and "system_prompt" not in listed


@pytest.mark.parametrize("query", [{"status": "done"}, {"task": "x"}, {"trigger": "nope"}])
def test_a_bad_filter_is_400(cast, query):
    response = client_of(cast).get("/api/runs", query)
    assert response.status_code == 400 and response.json()["code"] == "invalid"


def test_an_agent_sees_its_own_runs_only(cast, worked):
    _, lena_run, sarah_run = worked
    sarah = client_of(cast, cast.sarah)
    assert [r["id"] for r in sarah.get("/api/runs").json()["results"]] == [sarah_run.pk]
    assert sarah.get(f"/api/runs/{sarah_run.pk}").status_code == 200
    other = sarah.get(f"/api/runs/{lena_run.pk}")
    assert other.status_code == 404
    assert other.json() == {
        "success": False,
        "error": f"Run not found: {lena_run.pk}",
        "code": "run_not_found",
    }


def test_another_organization_sees_no_run(cast, worked):
    _, lena_run, _ = worked
    bob = KeyClient(make_key(cast.other, cast.bob))
    assert bob.get(f"/api/runs/{lena_run.pk}").status_code == 404
    assert KeyClient(make_key(cast.other)).get("/api/runs").json()["results"] == []
    assert client_of(cast).get("/api/runs/abc").status_code == 404


def test_the_list_costs_the_same_queries_for_one_run_or_many(
    cast, worked, django_assert_max_num_queries
):
    client = client_of(cast)
    with django_assert_max_num_queries(8):
        assert client.get("/api/runs").status_code == 200


def test_the_agents_api_says_who_is_managed(cast):
    client = client_of(cast)
    assert client.get("/api/agents/agent-alex").json()["runtime"] == "managed"
    rows = client.get("/api/agents").json()["results"]
    assert {a["id"]: a["runtime"] for a in rows}["agent-morgan"] == "external"


def test_the_admin_shows_runs_on_the_run_task_and_agent_pages(cast, worked, client):
    from tests.factories import make_admin_user

    task, lena_run, _ = worked
    client.force_login(make_admin_user(cast.org))
    page = client.get(f"/admin/runtime/run/{lena_run.pk}/change/").content.decode()
    assert 'Called <code class="tool-name">delegate_task</code>' in page
    assert "recommend_delegate" in page
    page = client.get(f"/admin/tasks/task/{task.pk}/change/").content.decode()
    assert f"run #{lena_run.pk}" in page and "Managed runs it woke" in page
    assert client.get("/admin/tasks/task/add/").status_code == 200
    page = client.get(f"/admin/organization/agent/{cast.lena.pk}/change/").content.decode()
    assert f"run #{lena_run.pk}" in page
    assert client.get("/admin/runtime/run/").status_code == 200


def test_a_visibility_timeout_shorter_than_a_run_fails_at_start_up(settings):
    from django.core.exceptions import ImproperlyConfigured

    from runtime.apps import check_run_time_limit

    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 1800}
    settings.RUNTIME_RUN_TIME_LIMIT = 1800
    with pytest.raises(ImproperlyConfigured, match="RUNTIME_RUN_TIME_LIMIT"):
        check_run_time_limit()
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    check_run_time_limit()
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 10}
    check_run_time_limit()
