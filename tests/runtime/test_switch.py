"""An agent made managed in the admin is run at once for the work it already holds (and an
agent made external again is not)."""

import pytest
from django.contrib.auth import get_user_model

from runtime.models import Run
from tasks import services
from tests.organization.test_admin import change_url, form_of

pytestmark = pytest.mark.django_db(transaction=True)


def switch(client, agent, runtime: str):
    url = change_url(agent)
    data = form_of(client, url, "agent_form")
    data["runtime"] = runtime
    response = client.post(url, data)
    assert response.status_code == 302, response.context["errors"]


def test_an_agent_made_managed_is_woken_for_the_tasks_it_holds(cast, client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    task = services.task_create(org=cast.org, actor=cast.by_human, title="t", assignee=cast.morgan)
    assert not Run.objects.filter(agent=cast.morgan).exists()  # external: it calls us
    switch(client, cast.morgan, "managed")
    (run,) = Run.objects.filter(agent=cast.morgan)
    assert (run.status, run.task_id, run.trigger) == ("queued", task.pk, "resumed")
    Run.objects.all().delete()
    switch(client, cast.morgan, "external")
    assert not Run.objects.exists()
