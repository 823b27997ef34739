"""Issue 40 §2 in the admin: the organizations' export action and the import page."""

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from organization.models import Agent, Organization
from tests.factories import make_admin_user, make_agent, make_org

from .conftest import export, rows_of, without_identity

pytestmark = pytest.mark.django_db

ORGANIZATIONS = reverse("admin:organization_organization_changelist")
IMPORT = reverse("admin:organization_organization_import")


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def bob_client(client, demo):
    """Bob administers the demo only (staff, no Django permissions)."""
    client.force_login(make_admin_user(demo, username="bob"))
    return client


def upload(document: dict) -> SimpleUploadedFile:
    return SimpleUploadedFile("org.json", json.dumps(document).encode(), "application/json")


def test_the_export_action_downloads_the_organization_file(settled_demo, root_client):
    answer = root_client.post(
        ORGANIZATIONS, {"action": "export_file", "_selected_action": [settled_demo.pk]}
    )
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/json"
    assert answer["Content-Disposition"] == 'attachment; filename="demo.agent-org.json"'
    assert without_identity(json.loads(answer.content)) == without_identity(export("demo"))


def test_the_export_action_takes_one_organization_and_only_the_users_own(settled_demo, bob_client):
    other = make_org("other")
    answer = bob_client.post(
        ORGANIZATIONS, {"action": "export_file", "_selected_action": [other.pk]}
    )
    # Not among Bob's organizations: the action has nothing selected (Django's message).
    assert answer.status_code == 302
    assert "attachment" not in answer.get("Content-Disposition", "")
    root = get_user_model().objects.create_superuser("root", password="pw")
    bob_client.force_login(root)
    answer = bob_client.post(
        ORGANIZATIONS,
        {"action": "export_file", "_selected_action": [other.pk, settled_demo.pk]},
        follow=True,
    )
    assert "Export one organization at a time." in answer.content.decode()


def test_the_import_page_shows_the_changes_then_imports_on_confirmation(settled_demo, bob_client):
    assert 'href="/admin/organization/organization/import/"' in (
        bob_client.get(ORGANIZATIONS).content.decode()
    )
    document = export("demo")
    next(a for a in document["agents"] if a["id"] == "agent-alex")["workload_capacity"] = 2
    before = rows_of(settled_demo)

    preview = bob_client.post(IMPORT, {"file": upload(document)})

    page = preview.content.decode()
    assert preview.status_code == 200
    assert "update agent agent-alex: workload_capacity: 5 → 2" in page
    assert "Dry run: nothing was written." in page
    assert rows_of(settled_demo) == before

    done = bob_client.post(IMPORT, {"document": json.dumps(document), "confirm": "1"})

    assert done.status_code == 302
    assert done["Location"] == reverse(
        "admin:organization_organization_change", args=[settled_demo.pk]
    )
    assert Agent.objects.get(organization=settled_demo, handle="agent-alex").workload_capacity == 2
    assert LogEntry.objects.get(object_id=str(settled_demo.pk)).change_message == (
        "Imported from a file."
    )
    # Who changed it: Bob, in the agent's history.
    last = Agent.objects.get(organization=settled_demo, handle="agent-alex").history.first()
    assert (last.history_actor_kind, last.history_actor_label) == ("user", "bob")


def test_the_import_page_refuses_a_bad_file_naming_the_item(settled_demo, bob_client):
    document = export("demo")
    document["agents"][0]["team"] = "Marketing"
    before = rows_of(settled_demo)
    answer = bob_client.post(IMPORT, {"document": json.dumps(document), "confirm": "1"})
    assert answer.status_code == 200
    assert (
        "Nothing was imported: agents[0] (agent-alex): team: Team not found: Marketing"
        in answer.content.decode()
    )
    assert rows_of(settled_demo) == before


def test_only_a_superuser_imports_a_new_organization_and_staff_only_into_their_own(
    settled_demo, bob_client
):
    other = make_org("other")
    make_agent(other, "agent-alex")
    other_rows = rows_of(other)
    document = export("demo")
    refusal = "You may import only into an organization you administer"
    for slug in ("other", "brand-new"):
        answer = bob_client.post(
            IMPORT, {"document": json.dumps(document), "as_slug": slug, "confirm": "1"}
        )
        assert refusal in answer.content.decode()
    assert rows_of(other) == other_rows
    assert not Organization.objects.filter(slug="brand-new").exists()

    bob_client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    answer = bob_client.post(
        IMPORT, {"document": json.dumps(document), "as_slug": "brand-new", "confirm": "1"}
    )
    assert answer.status_code == 302
    assert without_identity(export("brand-new")) == without_identity(document)


def test_staff_of_no_organization_cannot_open_the_import_page(client, db):
    client.force_login(make_admin_user(None, username="nobody"))
    assert client.get(IMPORT).status_code == 403
