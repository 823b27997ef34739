"""Routines in the admin: made and changed through the services (the PeriodicTask follows), the
list with next run and last occurrence, the secret on the routine's page and its rotate action."""

import pytest
from django_celery_beat.models import PeriodicTask

from organization.models import Membership
from routines import services
from routines.models import Routine
from tests.factories import make_admin_user, make_team

pytestmark = pytest.mark.django_db

FORM = {
    "title": "Weekly dependency review",
    "description": "",
    "required_expertise": "PostgreSQL",
    "urgency": "normal",
    "cron": "0 9 * * 1",
    "timezone": "Europe/Paris",
    "interval_seconds": "",
    "concurrency": "skip",
    "catch_up": "skip",
    "enabled": "on",
}


def test_a_routine_added_in_the_admin_is_on_the_beat(client, cast):
    client.force_login(make_admin_user(cast.org))
    team = cast.alex.team
    response = client.post(
        "/admin/routines/routine/add/", {**FORM, "organization": cast.org.pk, "team": team.pk}
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    routine = Routine.objects.get()
    assert routine.team == team and routine.next_run_at is not None
    assert PeriodicTask.objects.get(name=f"Routine {routine.pk}").crontab.day_of_week == "1"


@pytest.mark.parametrize(
    "change, error",
    [
        ({"cron": "0 9 * *"}, "five fields"),
        ({"interval_seconds": "60"}, "either cron"),
        ({"team": ""}, "the owner"),
    ],
)
def test_the_admin_form_refuses_what_the_api_refuses(client, cast, change, error):
    client.force_login(make_admin_user(cast.org))
    body = {**FORM, "organization": cast.org.pk, "team": cast.alex.team.pk, **change}
    response = client.post("/admin/routines/routine/add/", body)
    assert response.status_code == 200
    assert error in str(response.context["adminform"].form.errors)
    assert not Routine.objects.exists()


@pytest.mark.parametrize("owner", ["team", "agent"])
def test_the_admin_form_refuses_an_owner_of_another_organization(client, cast, owner):
    # A staff member of both organizations: the form offers the owners of each.
    user = make_admin_user(cast.org)
    Membership.objects.create(user=user, organization=cast.other, is_admin=True)
    make_team(cast.other, "Development")  # same name: the owner is the row chosen, not its name
    client.force_login(user)
    chosen = {"team": cast.alex.team.pk} if owner == "team" else {"agent": cast.alex.pk}
    body = {**FORM, "organization": cast.other.pk, **chosen}
    response = client.post("/admin/routines/routine/add/", body)
    assert response.status_code == 200
    assert f"This {owner} is not of" in str(response.context["adminform"].form.errors)
    assert not Routine.objects.exists()


def test_the_list_shows_next_run_and_the_last_occurrence_and_its_outcome(client, cast):
    made = cast.routine(title="Dependency review")
    cast.run(made)
    client.force_login(make_admin_user(cast.org))
    page = client.get("/admin/routines/routine/").content.decode()
    assert "Dependency review" in page
    assert "occurrence-status-created" in page
    assert "0 * * * * (UTC)" in page


def test_the_page_shows_the_secret_and_the_action_rotates_it(client, cast):
    made = cast.routine()
    client.force_login(make_admin_user(cast.org))
    page = client.get(f"/admin/routines/routine/{made['id']}/change/").content.decode()
    assert made["webhook_secret"] in page

    response = client.post(
        "/admin/routines/routine/",
        {"action": "rotate_secret", "_selected_action": [made["id"]]},
        follow=True,
    )
    assert "Rotated the webhook secret of 1 routine(s)" in response.content.decode()
    new = services.webhook_secret(Routine.objects.get(pk=made["id"]))
    assert new != made["webhook_secret"]
    assert new in client.get(f"/admin/routines/routine/{made['id']}/change/").content.decode()


def test_another_organizations_routine_is_not_in_the_admin(client, cast):
    made = cast.routine()
    client.force_login(make_admin_user(cast.other))
    change = f"/admin/routines/routine/{made['id']}/change/"
    # Django's admin answers a missing object with a redirect to the index.
    response = client.get(change)
    assert response.status_code == 302 and response.url == "/admin/"
    assert made["webhook_secret"] not in client.get(change, follow=True).content.decode()
    assert "Dependency review" not in client.get("/admin/routines/routine/").content.decode()
    client.post(f"/admin/routines/routine/{made['id']}/delete/", {"post": "yes"})
    assert Routine.objects.filter(pk=made["id"]).exists()
    rotate = {"action": "rotate_secret", "_selected_action": [made["id"]]}
    client.post("/admin/routines/routine/", rotate)
    assert services.webhook_secret(Routine.objects.get(pk=made["id"])) == made["webhook_secret"]


def test_deleting_in_the_admin_removes_the_periodic_task(client, cast):
    made = cast.routine()
    client.force_login(make_admin_user(cast.org))
    response = client.post(f"/admin/routines/routine/{made['id']}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not PeriodicTask.objects.filter(name=f"Routine {made['id']}").exists()
