"""An agent's id (`handle`) is its identity in the audit trail: fixed once it exists, and never
taken again by a new agent while a task's delegation chain still names it.

Tasks name their agents by handle in `delegation_chain`, which decides what an agent key sees
and what loop detection refuses. A renamed agent would lose sight of its tasks and escape loop
detection; a new agent given a former agent's handle would see that agent's tasks.
"""

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from organization.demo import seed_demo_organization
from organization.models import Agent
from tasks.models import Task
from tests.conftest import KeyClient, agent_of
from tests.factories import make_agent, make_key, make_org
from tests.organization.test_admin import change_url, form_of

pytestmark = pytest.mark.django_db

ADD = reverse("admin:organization_agent_add")


def fixed(handle: str) -> str:
    return (
        f"An agent's id cannot change: {handle} is its identity in its tasks' audit trail "
        "(their delegation chains). To use another id, create a new agent."
    )


def former(handle: str) -> str:
    return (
        f"{handle} was the id of a former agent and stays in its tasks' audit trail: "
        "choose another id."
    )


@pytest.fixture
def root_client(client, db):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    return client


def handles(org) -> list[str]:
    return sorted(org.agents.values_list("handle", flat=True))


def delegated_task(org, source: Agent, target: Agent) -> Task:
    """A task `source` created for itself and delegated to `target`, through the API."""
    client = KeyClient(make_key(org, source))
    response = client.post(
        "/api/tasks", {"title": "Migrate the billing DB", "agent_id": source.handle}, format="json"
    )
    assert response.status_code == 201, response.content
    task_id = response.json()["id"]
    response = client.post(
        f"/api/tasks/{task_id}/delegate", {"agent_id": target.handle}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["delegation_chain"] == [source.handle, target.handle]
    return Task.objects.get(pk=task_id)


def delete_in_admin(client, agent: Agent) -> None:
    url = reverse("admin:organization_agent_delete", args=[agent.pk])
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302, response.content
    assert not Agent.objects.filter(pk=agent.pk).exists()


def add_form(client, org, **fields) -> dict:
    data = form_of(client, f"{ADD}?organization={org.pk}", "agent_form")
    data.update({"organization": org.pk, "name": "Newcomer", **fields})
    return data


# --- the admin -------------------------------------------------------------------------------


def test_the_change_page_shows_the_id_read_only_and_the_add_page_takes_it(root_client):
    org = make_org("acme")
    agent = make_agent(org, "agent-sarah", name="Sarah")
    response = root_client.get(change_url(agent))
    assert response.status_code == 200
    admin_form = response.context["adminform"]
    assert "handle" not in admin_form.form.fields
    assert "handle" in admin_form.readonly_fields
    assert 'name="handle"' not in response.content.decode()
    assert "agent-sarah" in response.content.decode()
    response = root_client.get(f"{ADD}?organization={org.pk}")
    assert "handle" in response.context["adminform"].form.fields


def test_a_forged_post_on_the_change_page_does_not_change_the_id(root_client):
    org = make_org("acme")
    agent = make_agent(org, "agent-sarah", name="Sarah")
    url = change_url(agent)
    data = form_of(root_client, url, "agent_form")
    assert "handle" not in data
    data.update({"handle": "agent-renamed", "name": "Sarah Connor"})
    response = root_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    agent.refresh_from_db()
    assert (agent.handle, agent.name) == ("agent-sarah", "Sarah Connor")
    assert handles(org) == ["agent-sarah"]


def test_a_taken_id_on_the_add_page_is_a_form_error_not_a_crash(root_client):
    org = make_org("acme")
    make_agent(org, "agent-sarah", name="Sarah")
    response = root_client.post(ADD, add_form(root_client, org, handle="agent-sarah"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    # The agent that has the id now: the taken-id error alone, not the former agent's.
    assert errors == {"__all__": ["Agent with this Organization and Id already exists."]}
    assert handles(org) == ["agent-sarah"]


# --- any other path: the model -----------------------------------------------------------------


def test_saving_an_agent_with_a_changed_id_is_refused():
    org = make_org("acme")
    make_agent(org, "agent-sarah")
    agent = Agent.objects.get(handle="agent-sarah")
    agent.handle = "agent-renamed"
    with pytest.raises(ValidationError) as refused:
        agent.save()
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    with pytest.raises(ValidationError) as refused:
        agent.save(update_fields=["handle"])
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    with pytest.raises(ValidationError) as refused:
        agent.full_clean()
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    assert handles(org) == ["agent-sarah"]
    # A save that does not write the handle is not refused (nor writes it).
    agent.name = "Sarah B."
    agent.save(update_fields=["name"])
    assert Agent.objects.values_list("handle", "name").get() == ("agent-sarah", "Sarah B.")


def test_a_new_agent_saved_once_keeps_its_id_too():
    org = make_org("acme")
    agent = make_agent(org, "agent-sarah")
    agent.handle = "agent-renamed"
    with pytest.raises(ValidationError) as refused:
        agent.save()
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    assert handles(org) == ["agent-sarah"]


def test_an_unchanged_id_costs_the_save_no_query_to_check():
    org = make_org("acme")
    make_agent(org, "agent-sarah")
    agent = Agent.objects.get(handle="agent-sarah")
    agent.name = "Sarah B."
    with CaptureQueriesContext(connection) as queries:
        agent.save()
    reads = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT")]
    assert not [sql for sql in reads if 'FROM "organization_agent"' in sql], reads
    assert not [sql for sql in reads if 'FROM "tasks_task"' in sql], reads
    assert Agent.objects.values_list("handle", "name").get() == ("agent-sarah", "Sarah B.")


def test_a_changed_id_is_refused_when_the_handle_was_deferred_or_reloaded():
    org = make_org("acme")
    sarah = make_agent(org, "agent-sarah")
    deferred = Agent.objects.only("name").get(pk=sarah.pk)
    deferred.handle = "agent-renamed"
    with pytest.raises(ValidationError) as refused:
        deferred.save()
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    # An instance built by hand for an existing row is compared with the row.
    forged = Agent(pk=sarah.pk, organization=org, handle="agent-renamed", name="Sarah")
    with pytest.raises(ValidationError) as refused:
        forged.save()
    assert refused.value.message_dict == {"handle": [fixed("agent-sarah")]}
    # Reloaded: the handle it was reloaded with is the one saves compare with.
    sarah.refresh_from_db()
    sarah.name = "Sarah B."
    sarah.save()
    assert Agent.objects.values_list("handle", "name").get() == ("agent-sarah", "Sarah B.")


# --- a former agent's id ----------------------------------------------------------------------


def test_creating_an_agent_with_a_former_agents_id_is_refused(root_client):
    org = make_org("acme")
    sarah = make_agent(org, "agent-sarah", name="Sarah")
    alex = make_agent(org, "agent-alex", name="Alex")
    delegated_task(org, sarah, alex)
    delete_in_admin(root_client, sarah)
    response = root_client.post(ADD, add_form(root_client, org, handle="agent-sarah"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"handle": [former("agent-sarah")]}
    assert handles(org) == ["agent-alex"]
    with pytest.raises(ValidationError) as refused:
        make_agent(org, "agent-sarah")
    assert refused.value.message_dict == {"handle": [former("agent-sarah")]}
    assert handles(org) == ["agent-alex"]
    # Another id is welcome, and the former id in another organization too.
    response = root_client.post(ADD, add_form(root_client, org, handle="agent-sarah-2"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert handles(org) == ["agent-alex", "agent-sarah-2"]
    elsewhere = make_org("elsewhere")
    assert make_agent(elsewhere, "agent-sarah").handle == "agent-sarah"


def test_an_id_no_task_names_can_be_taken_again(root_client):
    org = make_org("acme")
    sarah = make_agent(org, "agent-sarah", name="Sarah")
    delete_in_admin(root_client, sarah)
    response = root_client.post(ADD, add_form(root_client, org, handle="agent-sarah"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert handles(org) == ["agent-sarah"]


def test_a_deleted_delegators_id_cannot_be_used_to_see_its_tasks(root_client):
    """The security property, end to end: Sarah delegates a task to Alex and is deleted; a new
    agent cannot be created with her id, so nobody gets to read the task through it."""
    org = make_org("acme")
    sarah = make_agent(org, "agent-sarah", name="Sarah")
    alex = make_agent(org, "agent-alex", name="Alex")
    bystander = make_agent(org, "agent-bystander", name="Bystander")
    task = delegated_task(org, sarah, alex)
    delete_in_admin(root_client, sarah)
    task.refresh_from_db()
    assert (task.assignee_id, task.delegation_chain) == (alex.pk, ["agent-sarah", "agent-alex"])

    response = root_client.post(ADD, add_form(root_client, org, handle="agent-sarah"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"handle": [former("agent-sarah")]}
    # Nor renaming a colleague to it.
    bystander.handle = "agent-sarah"
    with pytest.raises(ValidationError) as refused:
        bystander.save()
    assert refused.value.message_dict == {"handle": [fixed("agent-bystander")]}
    assert handles(org) == ["agent-alex", "agent-bystander"]

    url = f"/api/tasks/{task.pk}"
    assert KeyClient(make_key(org, agent_of(org, "agent-bystander"))).get(url).status_code == 404
    assert KeyClient(make_key(org, alex)).get(url).status_code == 200


def test_seed_demo_does_not_bring_back_a_deleted_demo_agent_its_tasks_name(root_client):
    org = seed_demo_organization(slug="acme")
    sarah, alex = agent_of(org, "agent-sarah"), agent_of(org, "agent-alex")
    delegated_task(org, sarah, alex)
    delete_in_admin(root_client, sarah)
    seed_demo_organization(slug="acme")
    assert "agent-sarah" not in handles(org)
    assert len(handles(org)) == 6
    # An agent it deletes that no task names comes back, under its senior as before.
    taylor = agent_of(org, "agent-taylor")
    delete_in_admin(root_client, taylor)
    seed_demo_organization(slug="acme")
    taylor = agent_of(org, "agent-taylor")
    assert (taylor.senior.handle, taylor.hierarchy_role.role) == ("agent-alice", "worker")
