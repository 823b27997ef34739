"""Pages (admin, console) refuse text the database cannot store with a 400 before any view runs
(infrastructure.middleware.PageInputMiddleware): a list filter's parameter and the console's moves
read the request themselves, and each answered 500 when PostgreSQL refused a NUL."""

import pytest
from django.urls import reverse

from tasks.demo import ESCALATED
from tasks.models import Task, TaskComment


@pytest.mark.parametrize("query", ["status__exact=%00", "q=a%00b", "o%00=1"])
def test_a_list_filter_with_a_nul_is_a_400(root_client, query):
    response = root_client.get(f"/admin/tasks/task/?{query}")
    assert response.status_code == 400
    assert "contains a NUL character" in response.content.decode()
    assert root_client.get("/admin/tasks/task/?status__exact=assigned").status_code == 200


@pytest.mark.parametrize(
    "move, field",
    [
        ("assign", "agent"),
        ("comment", "body"),
        ("cancel", "reason"),
    ],
)
def test_a_console_move_with_a_nul_is_a_400_and_changes_nothing(root_client, demo, move, field):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    before = (task.status, task.assignee_id, TaskComment.objects.count())
    url = reverse(f"admin:tasks_task_console_{move}", args=[task.pk])
    response = root_client.post(url, {field: "a\x00b"})
    assert response.status_code == 400
    assert (
        response.content.decode()
        == f"Invalid input: form field {field!r} contains a NUL character."
    )
    task.refresh_from_db()
    assert (task.status, task.assignee_id, TaskComment.objects.count()) == before
