"""An agent made managed in the admin is run at once for the work it already holds (and an
agent made external again is not)."""

import pytest
from django.contrib.auth import get_user_model

from runtime.lease import CLAIMED
from runtime.models import Run
from runtime.runner import run_agent
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


def test_an_agent_made_external_while_its_run_is_queued_and_managed_again_is_woken_again(
    cast, client
):
    """Alex's run is queued for his task; he is made external before a worker takes it, so the
    run fails without a model call (nothing was run). Made managed again, he still holds the
    task, never started and seen by no run: he is woken for it, as the switch promises. The
    failed run's trigger counted as a run having seen the task: no run ever came, the task
    stayed `assigned` for ever (and the sweep does not look at items from before a switch)."""
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    task = services.task_create(org=cast.org, actor=cast.by_human, title="t", assignee=cast.alex)
    (queued,) = Run.objects.filter(agent=cast.alex)
    switch(client, cast.alex, "external")
    assert run_agent(queued.pk) == CLAIMED
    queued.refresh_from_db()
    assert queued.status == "failed" and "no longer managed" in queued.error
    switch(client, cast.alex, "managed")
    runs = list(Run.objects.filter(agent=cast.alex).order_by("pk"))
    assert len(runs) == 2, runs
    assert (runs[1].status, runs[1].task_id, runs[1].trigger) == ("queued", task.pk, "resumed")
