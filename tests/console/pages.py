"""Reading the console's pages in tests: a task's page, how many statements a page runs."""

from django.db import connection
from django.urls import reverse


def queries_of(client, url) -> int:
    """How many SQL statements a GET of `url` runs (once warm)."""
    client.get(url)
    seen = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert client.get(url).status_code == 200
    return len(seen)


def page_of(client, task) -> str:
    """The HTML of the task's page (it must answer 200)."""
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode()
