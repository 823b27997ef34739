"""Queries per move on the REST hot paths (issue 10 §3-4): assign, claim and complete in at most 8.

What the 8 are (in a test the transaction's BEGIN/COMMIT are a SAVEPOINT and its RELEASE, so
they are counted here as they are round trips in production): the key; the task, locked and
checked for visibility in one read, with its organization's team rule; the target's and the
holder's rows locked (the target named by handle is read by that same statement); the target's
workload, counted under the lock; the task's UPDATE; the audit row, with the recipient's inbox
item in the same statement; and, for a completion, the holder's next queued task if it has room
(one statement that counts the room too). Each answer is also checked to be the task as a fresh
read shows it: the response is serialized from what the move wrote, not read again.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from organization.models import ApiKey
from tasks.models import Task, TaskEvent, TaskStatus
from tests.conftest import requires_postgres
from tests.factories import give_tasks

from .conftest import create, post

# The counts are PostgreSQL's: elsewhere the audit row and the inbox item are two INSERTs.
pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db]

MAX_PER_MOVE = 8


def used_just_now():
    """Keys recorded as used this minute: the once-a-minute write is not part of a request."""
    ApiKey.objects.update(last_used_at=timezone.now())


# What only GET /api/tasks/<id> shows (issue 11 §1): the subtasks cost a query a move spares.
DETAIL_ONLY = {"subtasks", "subtask_progress", "cost_usd"}


def assert_answer_is_fresh(client, response):
    assert response.status_code == 200, response.content
    detail = client.get(f"/api/tasks/{response.json()['id']}").json()
    assert set(detail) - set(response.json()) == DETAIL_ONLY
    assert response.json() == {k: v for k, v in detail.items() if k not in DETAIL_ONLY}


def test_assign_by_an_organization_key(cast, django_assert_max_num_queries):
    task = create(cast.human).json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE):
        response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert_answer_is_fresh(cast.human, response)
    assert response.json()["assignee"] == "agent-alex"
    assert cast.alex.inbox_items.get().kind == "assigned"


def test_assign_by_an_agent(cast, django_assert_max_num_queries):
    sarah = cast.client(cast.sarah)
    task = create(sarah).json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE):
        response = post(sarah, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert_answer_is_fresh(sarah, response)
    assert response.json()["delegation_chain"] == ["agent-sarah", "agent-alex"]


def test_assign_with_enforcement_on(cast, django_assert_max_num_queries):
    """Seed 003's role checks read both roles: the target's comes with its locked row, the
    caller's is read when the check needs it (the key's lookup does not read roles)."""
    cast.enforce()
    boss = cast.client(cast.boss)
    task = create(boss).json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE + 1):  # the caller's own role
        response = post(boss, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert_answer_is_fresh(boss, response)


def test_claim(cast, django_assert_max_num_queries):
    sarah = cast.client(cast.sarah)
    task = create(sarah).json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE):
        response = post(sarah, f"/api/tasks/{task['id']}/assign", {})
    assert_answer_is_fresh(sarah, response)
    assert response.json()["assignee"] == "agent-sarah"
    assert TaskEvent.objects.filter(task_id=task["id"]).last().kind == "claimed"


def test_complete(cast, django_assert_max_num_queries):
    alex = cast.client(cast.alex)
    task = give_tasks(cast.alex, 1, status=TaskStatus.IN_PROGRESS)[0]
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE):
        response = post(alex, f"/api/tasks/{task.pk}/status", {"status": "completed"})
    assert_answer_is_fresh(alex, response)
    assert response.json()["status"] == "completed"


def test_starting_work_locks_no_agent_row(cast):
    """assigned → in_progress changes nobody's workload: the holder's row is not locked (one
    statement fewer than a completion, which frees the holder)."""
    alex = cast.client(cast.alex)
    task = give_tasks(cast.alex, 1, status=TaskStatus.ASSIGNED)[0]
    used_just_now()
    with CaptureQueriesContext(connection) as sent:
        response = post(alex, f"/api/tasks/{task.pk}/status", {"status": "in_progress"})
    locks = [q["sql"] for q in sent.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locks) == 1 and locks[0].startswith('SELECT "tasks_task"')  # the task's own
    assert_answer_is_fresh(alex, response)
    with CaptureQueriesContext(connection) as sent:
        post(alex, f"/api/tasks/{task.pk}/status", {"status": "completed"})
    assert any(
        '"organization_agent"' in q["sql"] and "FOR NO KEY UPDATE" in q["sql"]
        for q in sent.captured_queries
    )


def test_complete_hands_the_freed_slot_to_the_queue(cast, django_assert_max_num_queries):
    """Rule 5 costs the queued task's own write: its UPDATE, and its audit row with the inbox
    item (full again, the holder is not looked at for a next one); and one statement to see that
    the queue is not empty before reading it (a move that frees room mostly finds it empty, and
    that check costs a small part of the locked read of the queue)."""
    alex = cast.client(cast.alex)
    task = give_tasks(cast.alex, 5, status=TaskStatus.IN_PROGRESS)[0]
    waiting = Task.objects.create(
        organization=cast.org, title="waits", status=TaskStatus.QUEUED, queued_for=cast.alex
    )
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE + 3):
        response = post(alex, f"/api/tasks/{task.pk}/status", {"status": "completed"})
    assert_answer_is_fresh(alex, response)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.assignee) == (TaskStatus.ASSIGNED, cast.alex)


def test_reassign_away_from_a_holder_looks_at_its_queue(cast, django_assert_max_num_queries):
    """The holder who loses the task may take a queued one (rule 5): one statement more."""
    task = create(cast.human, agent_id="agent-sarah").json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE + 1):
        response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert_answer_is_fresh(cast.human, response)


def test_the_count_does_not_grow_with_the_workload(cast, django_assert_max_num_queries):
    give_tasks(cast.alex, 4)
    task = create(cast.human).json()
    used_just_now()
    with django_assert_max_num_queries(MAX_PER_MOVE):
        response = post(cast.human, f"/api/tasks/{task['id']}/assign", {"agent_id": "agent-alex"})
    assert_answer_is_fresh(cast.human, response)
