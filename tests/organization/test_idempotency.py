"""`Idempotency-Key` on the POSTs that create (organization/idempotency.py), and what a client
sees when the database connection is lost mid-request: 503 with Retry-After, never a 500, and a
retry with the key tells whether the write happened."""

from datetime import timedelta

import pytest
from django.utils import timezone

from organization.models import IdempotencyKey
from tasks.models import Task, TaskComment
from tests.conftest import KeyClient, requires_postgres
from tests.factories import make_agent, make_key, make_org
from tests.pg_proxy import connections_through_proxy


@pytest.fixture
def org(db):
    org = make_org("acme")
    make_agent(org, "agent-sarah")
    make_agent(org, "agent-alex")
    return org


@pytest.fixture
def sarah(org):
    return KeyClient(make_key(org, org.agents.get(handle="agent-sarah")))


def create(client, body, key="key-1"):
    return client.post("/api/tasks", body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_the_same_key_and_body_answer_the_first_answer_without_writing_again(org, sarah):
    first = create(sarah, {"title": "Index migration"})
    again = create(sarah, {"title": "Index migration"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Task.objects.filter(title="Index migration").count() == 1


def test_the_same_key_with_another_body_is_refused(org, sarah):
    assert create(sarah, {"title": "Index migration"}).status_code == 201
    refused = create(sarah, {"title": "Something else"})
    assert refused.status_code == 422
    assert refused.json()["code"] == "idempotency_key_reused"
    assert refused.json()["success"] is False
    assert not Task.objects.filter(title="Something else").exists()


def test_keys_are_the_callers_own(org, sarah):
    alex = KeyClient(make_key(org, org.agents.get(handle="agent-alex")))
    other = make_org("other")
    make_agent(other, "agent-sarah")
    stranger = KeyClient(make_key(other, other.agents.get(handle="agent-sarah")))
    for client in (sarah, alex, stranger):
        assert create(client, {"title": "Same key"}).status_code == 201
    assert Task.objects.filter(title="Same key").count() == 3


def test_without_a_key_each_post_writes(org, sarah):
    for _ in range(2):
        assert sarah.post("/api/tasks", {"title": "Twice"}, format="json").status_code == 201
    assert Task.objects.filter(title="Twice").count() == 2


def test_an_error_is_not_kept_its_retry_runs_afresh(org, sarah):
    refused = create(sarah, {"title": "Not mine", "agent_id": "agent-nobody"})
    assert refused.status_code == 404
    assert not IdempotencyKey.objects.exists()
    assert create(sarah, {"title": "Not mine", "agent_id": "agent-alex"}).status_code == 201


def test_a_key_past_the_window_is_forgotten(org, sarah, settings):
    settings.IDEMPOTENCY_KEY_WINDOW_SECONDS = 60
    assert create(sarah, {"title": "Old"}).status_code == 201
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    again = create(sarah, {"title": "Old"})
    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert Task.objects.filter(title="Old").count() == 2
    assert IdempotencyKey.objects.count() == 1  # the old one pruned


def test_old_keys_of_the_organization_are_pruned_as_keys_are_used(org, sarah, settings):
    settings.IDEMPOTENCY_KEY_WINDOW_SECONDS = 60
    for n in range(3):
        assert create(sarah, {"title": f"t{n}"}, key=f"k{n}").status_code == 201
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert create(sarah, {"title": "new"}, key="fresh").status_code == 201
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["fresh"]


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "é"])
def test_a_key_that_is_not_visible_ascii_is_refused(org, sarah, key):
    refused = sarah.post(
        "/api/tasks",
        {"title": "k"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key.encode().decode("latin-1"),
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid"
    assert not Task.objects.exists()


def test_call_tool_and_comments_honour_the_key(org, sarah):
    call = {"toolName": "create_task", "params": {"title": "By tool"}}
    answers = [
        sarah.post("/api/agent-engine/call-tool", call, format="json", HTTP_IDEMPOTENCY_KEY="c")
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert Task.objects.filter(title="By tool").count() == 1

    task = Task.objects.get(title="By tool")
    for _ in range(2):
        answer = sarah.post(
            f"/api/tasks/{task.pk}/comments",
            {"body": "On it"},
            format="json",
            HTTP_IDEMPOTENCY_KEY="m",
        )
        assert answer.status_code == 201
    assert TaskComment.objects.filter(task=task).count() == 1


def test_a_started_collaboration_is_replayed_with_its_location(org, settings):
    from collaboration.models import CollaborationSession

    org_key = KeyClient(make_key(org))
    body = {
        "task": "Review the payment API",
        "agents": [{"name": "reviewer", "role": "Reviewer"}, {"name": "tester", "role": "Tester"}],
    }
    answers = [
        org_key.post("/api/collaborations", body, format="json", HTTP_IDEMPOTENCY_KEY="s")
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [202, 202], answers[0].content
    assert answers[1].json() == answers[0].json()
    assert answers[1]["Location"] == answers[0]["Location"] == answers[0].json()["url"]
    assert CollaborationSession.objects.count() == 1


# --- the connection lost mid-request: PgProxy drops the answer to the request's COMMIT -------


@pytest.fixture
def via_proxy(transactional_db):
    """Every new database connection of this process goes through a PgProxy."""
    with connections_through_proxy() as proxy:
        yield proxy


@requires_postgres()
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_answers_503_and_the_keys_retry_tells_the_write_happened(org, via_proxy):
    client = KeyClient(make_key(org, org.agents.get(handle="agent-sarah")))
    via_proxy.armed.set()  # the next COMMIT, the create's, is lost on its way back
    lost = create(client, {"title": "Index migration"})
    assert via_proxy.dropped.is_set()
    assert lost.status_code == 503
    assert lost["Retry-After"] == "1"
    assert lost.json()["success"] is False
    assert lost.json()["code"] == "database_unavailable"
    assert "Idempotency-Key" in lost.json()["error"]

    # The commit happened: the retry answers the write's own answer, and does not write again.
    retried = create(client, {"title": "Index migration"})
    assert retried.status_code == 201
    assert retried["Idempotent-Replayed"] == "true"
    (task,) = Task.objects.filter(title="Index migration")
    assert retried.json()["id"] == task.pk


@requires_postgres()
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_without_a_key_is_503_too(org, via_proxy):
    client = KeyClient(make_key(org, org.agents.get(handle="agent-sarah")))
    via_proxy.armed.set()
    lost = client.post("/api/tasks", {"title": "Unkeyed"}, format="json")
    assert via_proxy.dropped.is_set()
    assert (lost.status_code, lost.json()["code"]) == (503, "database_unavailable")
    assert lost["Retry-After"] == "1"


@requires_postgres()
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_before_the_write_committed_lets_the_keys_retry_write(org, via_proxy):
    client = KeyClient(make_key(org, org.agents.get(handle="agent-sarah")))
    via_proxy.cut_at(b'INSERT INTO "tasks_task"')  # killed as the task is inserted
    lost = create(client, {"title": "Cut short"})
    assert via_proxy.was_cut.is_set()
    assert (lost.status_code, lost.json()["code"]) == (503, "database_unavailable")
    assert lost["Retry-After"] == "1"
    assert not Task.objects.filter(title="Cut short").exists()
    assert not IdempotencyKey.objects.exists()  # rolled back with the write

    retried = create(client, {"title": "Cut short"})
    assert retried.status_code == 201
    assert "Idempotent-Replayed" not in retried
    assert Task.objects.filter(title="Cut short").count() == 1


def test_a_retried_usage_report_is_recorded_and_charged_once(org, sarah):
    from costs.models import UsageRecord

    report = {"provider": "acme", "model": "no-such-model", "prompt_tokens": 1}
    report |= {"completion_tokens": 1, "cost_usd": "0.50"}
    answers = [
        sarah.post("/api/usage", report, format="json", HTTP_IDEMPOTENCY_KEY="u") for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].json() == answers[1].json()
    assert answers[1]["Idempotent-Replayed"] == "true"
    assert UsageRecord.objects.count() == 1
