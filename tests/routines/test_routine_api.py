"""`/api/routines`: an organization key writes, an agent reads the routines its team or itself
owns; the body is checked (one owner, one schedule) and the beat gets a PeriodicTask."""

import json

import pytest
from django_celery_beat.models import PeriodicTask

from routines.models import Routine
from tests.factories import make_agent, make_team

from .conftest import assert_error

pytestmark = pytest.mark.django_db


def test_creating_a_routine_answers_it_with_its_secret_once(cast):
    made = cast.routine(
        description="Week of {date}", urgency="high", timezone="Europe/Paris", cron="0 9 * * 1"
    )

    assert made["title"] == "Dependency review"
    assert made["team"] == "Development" and made["agent"] is None
    assert made["cron"] == "0 9 * * 1" and made["interval_seconds"] is None
    assert made["timezone"] == "Europe/Paris"
    assert (made["concurrency"], made["catch_up"], made["enabled"]) == ("skip", "skip", True)
    assert made["last_occurrence"] is None
    assert made["next_run_at"] is not None
    assert len(made["webhook_secret"]) == 64
    again = cast.client.get(f"/api/routines/{made['id']}").json()
    assert "webhook_secret" not in again
    assert made["webhook_secret"] not in json.dumps(list(Routine.objects.values()), default=str)


def test_a_routine_has_one_periodic_task_on_the_beat_in_step_with_it(cast):
    made = cast.routine(cron="30 8 * * 1-5", timezone="Europe/Paris")
    task = PeriodicTask.objects.get(name=f"Routine {made['id']}")
    assert task.task == "routines.fire" and json.loads(task.kwargs) == {"routine": made["id"]}
    assert task.crontab.hour == "8" and task.crontab.day_of_week == "1-5"
    assert str(task.crontab.timezone) == "Europe/Paris"

    response = cast.client.patch(
        f"/api/routines/{made['id']}", {"interval_seconds": 60, "enabled": False}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["cron"] == "" and response.json()["next_run_at"] is None
    task.refresh_from_db()
    assert task.crontab is None and task.interval.every == 60 and task.enabled is False

    assert cast.client.delete(f"/api/routines/{made['id']}").status_code == 204
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()
    assert not Routine.objects.filter(pk=made["id"]).exists()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"team": "Development", "agent": "agent-alex"}, "either team"),
        ({"team": None}, "either team"),
        ({"cron": "0 9 * * 1", "interval_seconds": 60}, "either cron"),
        ({"cron": ""}, "either cron"),
        ({"cron": "0 9 * *"}, "five fields"),
        ({"cron": "61 9 * * *"}, "cron"),
        ({"cron": "0 0 31 2 *"}, "never comes"),
        ({"cron": "0 9 * * 1", "timezone": "Mars/Olympus"}, "time zone"),
        # Valid for celery, longer than the beat's column for the field (64).
        ({"cron": "0 9 * * " + ",".join(["mon", "tue", "wed", "thu", "fri"] * 4)}, "too long"),
        ({"required_expertise": ""}, "required_expertise"),
    ],
)
def test_a_body_without_one_owner_and_one_valid_schedule_is_400(cast, fields, message):
    body = {"title": "t", "team": "Development", "required_expertise": "PostgreSQL"}
    body.setdefault("cron", "0 * * * *")
    response = cast.client.post("/api/routines", {**body, **fields}, format="json")
    assert_error(response, 400, "invalid")
    assert message in response.json()["error"]
    assert not Routine.objects.exists()


def test_an_interval_under_five_seconds_is_400(cast):
    body = {"title": "t", "agent": "agent-alex", "interval_seconds": 4}
    response = cast.client.post("/api/routines", body, format="json")
    assert_error(response, 400, "invalid")
    assert not Routine.objects.exists()


def test_an_owner_of_another_organization_is_404(cast):
    make_team(cast.other, "Elsewhere")
    body = {"title": "t", "cron": "0 * * * *", "required_expertise": "x"}
    team = cast.client.post("/api/routines", {**body, "team": "Elsewhere"}, format="json")
    assert_error(team, 404, "team_not_found")
    agent = cast.client.post("/api/routines", {**body, "agent": "agent-bob"}, format="json")
    assert_error(agent, 404, "agent_not_found")


def test_patch_to_an_owner_of_another_organization_is_404_and_changes_nothing(cast):
    make_team(cast.other, "Elsewhere")
    made = cast.routine()
    url = f"/api/routines/{made['id']}"
    assert_error(
        cast.client.patch(url, {"team": "Elsewhere"}, format="json"), 404, "team_not_found"
    )
    response = cast.client.patch(url, {"agent": "agent-bob"}, format="json")
    assert_error(response, 404, "agent_not_found")
    routine = Routine.objects.get(pk=made["id"])
    assert (routine.team.name, routine.agent) == ("Development", None)


def test_an_agent_reads_the_routines_of_its_team_and_its_own_and_writes_none(cast):
    development = cast.routine(title="Dependency review")
    mine = cast.routine(title="Alex's own", agent="agent-alex")
    ops = cast.routine(title="Backups", team="Ops", required_expertise="Redis")
    sarahs = cast.routine(title="Sarah's own", agent="agent-sarah")

    alex = cast.agent_client(cast.alex)
    listed = alex.get("/api/routines").json()["results"]
    assert [r["title"] for r in listed] == ["Alex's own", "Dependency review"]
    assert alex.get(f"/api/routines/{development['id']}").status_code == 200
    assert alex.get(f"/api/routines/{mine['id']}/occurrences").status_code == 200
    assert_error(alex.get(f"/api/routines/{ops['id']}"), 404, "routine_not_found")
    assert_error(alex.get(f"/api/routines/{sarahs['id']}"), 404, "routine_not_found")

    assert_error(
        alex.post("/api/routines", {"title": "t", "agent": "agent-alex", "cron": "0 * * * *"}),
        403,
        "human_required",
    )
    assert_error(
        alex.patch(f"/api/routines/{mine['id']}", {"enabled": False}), 403, "human_required"
    )
    assert_error(alex.post(f"/api/routines/{mine['id']}/run"), 403, "human_required")
    assert_error(alex.delete(f"/api/routines/{mine['id']}"), 403, "human_required")
    assert Routine.objects.get(pk=mine["id"]).enabled is True


def test_an_agent_without_a_team_reads_only_its_own(cast):
    loner = make_agent(cast.org, "agent-loner", expertise=["Go"])
    cast.routine(title="Team's")
    cast.routine(title="Loner's", agent="agent-loner")
    listed = cast.agent_client(loner).get("/api/routines").json()["results"]
    assert [r["title"] for r in listed] == ["Loner's"]


def test_patch_changes_only_what_it_names(cast):
    made = cast.routine(title="Old", description="keep me")
    response = cast.client.patch(
        f"/api/routines/{made['id']}", {"title": "New", "concurrency": "queue"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["title"], body["description"], body["concurrency"]) == ("New", "keep me", "queue")
    assert body["team"] == "Development" and body["cron"] == "0 * * * *"


def test_patch_moves_the_owner_from_a_team_to_an_agent(cast):
    made = cast.routine()
    response = cast.client.patch(
        f"/api/routines/{made['id']}", {"agent": "agent-sarah"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert (response.json()["team"], response.json()["agent"]) == (None, "agent-sarah")


def test_the_list_reads_a_fixed_number_of_statements(cast, django_assert_max_num_queries):
    for n in range(5):
        made = cast.routine(title=f"r{n}", interval_seconds=60, concurrency="allow")
        cast.run(made)
    with django_assert_max_num_queries(6):
        response = cast.client.get("/api/routines")
    assert response.status_code == 200
    assert all(r["last_occurrence"]["outcome"] == "created" for r in response.json()["results"])


def test_a_change_that_keeps_the_schedule_keeps_the_beats_phase(cast):
    from datetime import timedelta

    from django.utils import timezone

    made = cast.routine(interval_seconds=60)
    ran_at = timezone.now() - timedelta(seconds=20)
    PeriodicTask.objects.filter(name=f"Routine {made['id']}").update(last_run_at=ran_at)

    response = cast.client.patch(f"/api/routines/{made['id']}", {"title": "New"}, format="json")

    assert response.json()["next_run_at"] == made["next_run_at"]
    task = PeriodicTask.objects.get(name=f"Routine {made['id']}")
    assert task.last_run_at == ran_at and "New" in task.description
