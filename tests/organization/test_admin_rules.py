"""The admin keeps the rules the other doors keep: role changes (the default supervisor holds the
supervisor role) and agent deletion (no task is left held by no one without an event)."""

import pytest
from django.urls import reverse

from organization.caller import Caller
from organization.models import Agent, AgentRole, TeamRule
from organization.services import agent_leaving
from tasks import services
from tasks.models import Task, TaskEvent, TaskStatus
from tasks.rules import Actor
from tests.factories import make_admin_user, make_agent, make_org
from tests.organization.test_admin import AGENTS, change_url, form_of

# `admin_client` is pytest-django's: logged in as the superuser "admin".


def delete_url(agent) -> str:
    return reverse("admin:organization_agent_delete", args=[agent.pk])


@pytest.fixture
def org(db):
    return make_org("acme")


@pytest.fixture
def boss(org):
    """The organization's default supervisor."""
    boss = make_agent(org, "agent-boss", hierarchy_role="supervisor")
    TeamRule.objects.create(organization=org, default_supervisor=boss)
    return boss


@pytest.fixture
def by_human(org):
    return Actor.of(Caller(organization=org, user=make_admin_user(org)))


def default_supervisor_of(org):
    return TeamRule.objects.get(organization=org).default_supervisor


# --- the role inline goes through the same service as the REST door ------------------------


def test_default_supervisor_changed_to_worker_in_its_form_stops_being_default(admin_client, boss):
    url = change_url(boss)
    data = form_of(admin_client, url, "agent_form")
    data["hierarchy_role-0-can_assign_to_peers"] = "on"
    assert admin_client.post(url, data).status_code == 302
    assert AgentRole.objects.get(agent=boss).can_assign_to_peers is True
    assert default_supervisor_of(boss.organization) == boss  # still a supervisor

    data = form_of(admin_client, url, "agent_form")
    data["hierarchy_role-0-role"] = "worker"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    assert AgentRole.objects.get(agent=boss).role == "worker"
    assert default_supervisor_of(boss.organization) is None
    # Who cleared it is on record, as when the REST door clears it.
    cleared = TeamRule.history.filter(organization_id=boss.organization_id).latest("history_id")
    assert (cleared.default_supervisor_id, cleared.history_actor_label) == (None, "admin")


def test_a_worker_escalates_to_humans_once_the_default_supervisor_is_no_supervisor(
    admin_client, boss, by_human
):
    worker = make_agent(boss.organization, "agent-wes", hierarchy_role="worker")
    url = change_url(boss)
    data = form_of(admin_client, url, "agent_form")
    data["hierarchy_role-0-role"] = "specialist"
    assert admin_client.post(url, data).status_code == 302
    task = services.task_create(org=boss.organization, actor=by_human, title="t", assignee=worker)
    task = services.task_escalate(task=task, actor=Actor.of(Caller(boss.organization, worker)))
    assert (task.status, task.assignee) == (TaskStatus.ESCALATED, None)


def test_deleting_the_default_supervisors_role_inline_stops_it_being_default(admin_client, boss):
    url = change_url(boss)
    data = form_of(admin_client, url, "agent_form")
    data["hierarchy_role-0-DELETE"] = "on"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    assert not AgentRole.objects.filter(agent=boss).exists()
    assert default_supervisor_of(boss.organization) is None


# --- deleting an agent moves its work on, each move with its event --------------------------


def test_deleting_an_agent_escalates_the_tasks_it_holds_to_its_senior(admin_client, org, by_human):
    senior = make_agent(org, "agent-sue")
    ann = make_agent(org, "agent-ann", senior=senior)
    held = services.task_create(org=org, actor=by_human, title="held", assignee=ann)
    started = services.task_create(org=org, actor=by_human, title="started", assignee=ann)
    services.task_set_status(task=started, actor=Actor.of(Caller(org, ann)), status="in_progress")

    response = admin_client.post(delete_url(ann), {"post": "yes"})

    assert response.status_code == 302
    assert not Agent.objects.filter(pk=ann.pk).exists()
    for task in (held, started):
        task.refresh_from_db()
        assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, senior)
        event = TaskEvent.objects.filter(task=task).latest("pk")
        assert (event.kind, event.recipient, event.reasoning) == (
            "escalated",
            senior,
            "agent-ann was deleted.",
        )


def test_deleting_an_agent_without_senior_escalates_to_the_default_supervisor(
    admin_client, boss, by_human
):
    ann = make_agent(boss.organization, "agent-ann")
    task = services.task_create(org=boss.organization, actor=by_human, title="t", assignee=ann)
    assert admin_client.post(delete_url(ann), {"post": "yes"}).status_code == 302
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, boss)


def test_deleting_an_agent_with_no_one_above_hands_its_tasks_to_humans(admin_client, org, by_human):
    ann = make_agent(org, "agent-ann")
    task = services.task_create(org=org, actor=by_human, title="t", assignee=ann)
    done = services.task_create(org=org, actor=by_human, title="done", assignee=ann)
    services.task_cancel(task=done, actor=by_human)
    events_before = TaskEvent.objects.filter(task=task).count()
    assert admin_client.post(delete_url(ann), {"post": "yes"}).status_code == 302
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.ESCALATED, None)
    assert TaskEvent.objects.filter(task=task).count() == events_before + 1
    # A finished task is no work to move on: it stays as it ended.
    assert Task.objects.get(pk=done.pk).status == TaskStatus.CANCELLED


def test_tasks_queued_for_a_deleted_agent_are_escalated_not_left_waiting(
    admin_client, org, by_human
):
    ann = make_agent(org, "agent-ann", workload_capacity=0)
    task = services.task_create(org=org, actor=by_human, title="t")
    task = services.task_queue(task=task, actor=by_human, to=ann)
    assert admin_client.post(delete_url(ann), {"post": "yes"}).status_code == 302
    task.refresh_from_db()
    assert (task.status, task.queued_for) == (TaskStatus.ESCALATED, None)
    assert TaskEvent.objects.filter(task=task).latest("pk").kind == "escalated"


def test_bulk_delete_escalates_the_tasks_of_every_deleted_agent(admin_client, boss, by_human):
    org = boss.organization
    ann, ben = make_agent(org, "agent-ann"), make_agent(org, "agent-ben")
    tasks = [
        services.task_create(org=org, actor=by_human, title=a.handle, assignee=a)
        for a in (ann, ben)
    ]
    response = admin_client.post(
        AGENTS, {"action": "delete_selected", "_selected_action": [ann.pk, ben.pk], "post": "yes"}
    )
    assert response.status_code == 302
    assert not Agent.objects.filter(pk__in=[ann.pk, ben.pk]).exists()
    for task in tasks:
        task.refresh_from_db()
        assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, boss)
        assert TaskEvent.objects.filter(task=task, kind="escalated").exists()


def test_the_delete_confirmation_says_the_agents_tasks_will_be_escalated(
    admin_client, org, by_human
):
    ann = make_agent(org, "agent-ann")
    services.task_create(org=org, actor=by_human, title="t", assignee=ann)
    page = admin_client.get(delete_url(ann)).content.decode()
    assert "holds 1 task(s) and 0 are queued for it: deleting it escalates them" in page
    bulk = admin_client.post(AGENTS, {"action": "delete_selected", "_selected_action": [ann.pk]})
    assert "deleting it escalates them" in bulk.content.decode()


def test_deleting_the_default_supervisor_clears_the_pointer_on_record(admin_client, boss):
    org = boss.organization
    assert admin_client.post(delete_url(boss), {"post": "yes"}).status_code == 302
    assert default_supervisor_of(org) is None
    cleared = TeamRule.history.filter(organization_id=org.pk).latest("history_id")
    assert (cleared.default_supervisor_id, cleared.history_actor_label) == (None, "admin")


def test_an_agent_whose_work_cannot_be_moved_is_not_deleted(
    admin_client, org, by_human, monkeypatch
):
    """Were the engine's receiver gone, the deletion refuses rather than orphan the task."""
    ann = make_agent(org, "agent-ann")
    task = services.task_create(org=org, actor=by_human, title="t", assignee=ann)
    monkeypatch.setattr(agent_leaving, "receivers", [])
    response = admin_client.post(delete_url(ann), {"post": "yes"}, follow=True)
    assert "Cannot delete agent-ann: it still holds 1 task(s)" in response.content.decode()
    assert Agent.objects.filter(pk=ann.pk).exists()
    task.refresh_from_db()
    assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, ann)
