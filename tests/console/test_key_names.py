"""An organization key's acts read as the key's name on the console (the API keeps its
`org-key:<prefix>` label), never another organization's key's name."""

import pytest
from django.urls import reverse

from collaboration.models import CollaborationSession
from organization.models import ApiKey
from organization.services import api_key_create
from tasks.models import Task
from tests.conftest import KeyClient
from tests.factories import make_admin_user, make_agent, make_org

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme():
    org = make_org("acme")
    make_agent(org, "agent-alex", expertise=["Go"])
    return org


def acts_of_a_named_key(acme):
    key, plaintext = api_key_create(organization=acme, name="CI deploy")
    client = KeyClient(plaintext)
    created = client.post(
        "/api/tasks", {"title": "Ship 1.2", "agent_id": "agent-alex"}, format="json"
    )
    assert created.status_code == 201, created.content
    task_id = created.json()["id"]
    said = client.post(f"/api/tasks/{task_id}/comments", {"body": "Go."}, format="json")
    assert said.status_code == 201
    assert said.json()["author_label"] == f"org-key:{key.prefix}"  # the API's label stays
    return key, Task.objects.get(pk=task_id)


def session_started_by(key, organization, task: str) -> CollaborationSession:
    """A collaboration of `organization` whose starter is the organization key `key`."""
    return CollaborationSession.objects.create(
        organization=organization,
        task=task,
        created_by=f"org-key:{key.prefix}",
        max_parallel=1,
        agent_timeout=60,
        max_total_tokens=1000,
    )


def test_a_task_page_names_the_key_that_created_and_commented_on_it(client, acme):
    key, task = acts_of_a_named_key(acme)
    client.force_login(make_admin_user(acme))
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "key “CI deploy” created the task" in html
    assert "<strong>key “CI deploy”</strong>" in html  # the comment's author
    assert f"org-key:{key.prefix}" not in html


def test_the_task_events_list_names_the_key_in_one_query_for_the_page(
    client, acme, django_assert_max_num_queries
):
    key, task = acts_of_a_named_key(acme)
    client.force_login(make_admin_user(acme))
    url = reverse("admin:tasks_taskevent_changelist")
    client.get(url)
    with django_assert_max_num_queries(12):
        html = client.get(url).content.decode()
    assert "key “CI deploy”" in html and f"org-key:{key.prefix}" not in html


def test_a_collaboration_names_the_key_that_started_it(client, acme):
    key, _ = api_key_create(organization=acme, name="Nightly review")
    session = session_started_by(key, acme, "Review the API")
    client.force_login(make_admin_user(acme))
    listing = client.get(reverse("admin:collaboration_collaborationsession_changelist"))
    assert "key “Nightly review”" in listing.content.decode()
    page = client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    assert "key “Nightly review”" in page


def test_another_organizations_key_is_never_named(client, acme):
    rival = make_org("rival")
    theirs, _ = api_key_create(organization=rival, name="Their secret pipeline")
    session_started_by(theirs, acme, "Forged")
    client.force_login(make_admin_user(acme))
    html = client.get(
        reverse("admin:collaboration_collaborationsession_changelist")
    ).content.decode()
    assert "Their secret pipeline" not in html
    assert f"organization key {theirs.prefix}" in html


def test_an_unnamed_key_reads_as_an_organization_key(client, acme):
    key, _ = api_key_create(organization=acme)
    session_started_by(key, acme, "Unnamed")
    client.force_login(make_admin_user(acme))
    html = client.get(
        reverse("admin:collaboration_collaborationsession_changelist")
    ).content.decode()
    assert f"organization key {key.prefix}" in html


def test_create_api_key_names_the_key_and_the_list_shows_it(client, acme):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_api_key", "--org", "acme", "--name", "Grafana alerts", stdout=out)
    key = ApiKey.objects.get(name="Grafana alerts")
    assert key.prefix in out.getvalue()
    client.force_login(make_admin_user(acme))
    html = client.get(reverse("admin:organization_apikey_changelist")).content.decode()
    assert "Grafana alerts" in html and "the organization" in html
