"""The tasks admin: scoped to the user's organizations, rules enforced, audit read-only."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from organization.models import Membership, TeamRule
from tasks.models import Task, TaskEvent, WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create, task_escalate
from tests.factories import give_tasks, make_admin_user, make_agent, make_org

pytestmark = pytest.mark.django_db

# The management forms of the task page's read-only inlines, as a browser posts them.
INLINE_FORMS = {
    f"{prefix}-{field}": 0
    for prefix in ("subtasks", "comments", "events")
    for field in ("TOTAL_FORMS", "INITIAL_FORMS")
}


@pytest.fixture
def world():
    ours, theirs = make_org("ours"), make_org("theirs")
    TeamRule.objects.create(organization=ours)
    alex = make_agent(ours, "agent-alex")
    full = make_agent(ours, "agent-full")
    give_tasks(full, 5)
    stranger = make_agent(theirs, "agent-stranger")
    mine = task_create(org=ours, actor=SYSTEM, title="Our task", assignee=alex)
    stuck = task_create(org=ours, actor=SYSTEM, title="Stuck task", assignee=alex)
    task_escalate(task=stuck, actor=SYSTEM, reason="nobody above")
    hidden = task_create(org=theirs, actor=SYSTEM, title="Their task", assignee=stranger)
    WebhookDelivery.objects.create(
        organization=ours, agent=alex, url="http://127.0.0.1:9/h", last_error="HTTP 500"
    )
    client = Client()
    client.force_login(make_admin_user(ours))
    return {
        "ours": ours,
        "alex": alex,
        "full": full,
        "mine": mine,
        "stuck": stuck,
        "hidden": hidden,
        "client": client,
    }


def test_the_list_shows_only_the_users_organizations(world):
    response = world["client"].get("/admin/tasks/task/")
    assert response.status_code == 200
    assert b"Our task" in response.content and b"Their task" not in response.content
    assert world["client"].get(f"/admin/tasks/task/{world['hidden'].pk}/change/").status_code == 302


def test_needs_attention_lists_tasks_escalated_to_humans(world):
    response = world["client"].get("/admin/tasks/task/?attention=needs")
    assert b"Stuck task" in response.content and b"Our task" not in response.content


def test_the_change_page_shows_the_event_history_read_only(world):
    response = world["client"].get(f"/admin/tasks/task/{world['stuck'].pk}/change/")
    assert response.status_code == 200
    assert b"escalated" in response.content and b"nobody above" in response.content


def test_assigning_in_the_admin_goes_through_the_rules(world):
    client = world["client"]
    data = {
        "organization": world["ours"].pk,
        "title": "Admin-made",
        "description": "",
        "required_expertise": "",
        "urgency": "high",
        "deadline": "",
        "assign_to": world["full"].pk,
        **INLINE_FORMS,
    }
    response = client.post("/admin/tasks/task/add/", data)
    assert response.status_code == 200
    assert b"capacity_exceeded" in response.content
    assert not Task.objects.filter(title="Admin-made").exists()
    data["assign_to"] = world["alex"].pk
    response = client.post("/admin/tasks/task/add/", data)
    assert response.status_code == 302, response.content[:2000]
    task = Task.objects.get(title="Admin-made")
    assert (task.assignee, task.urgency_rank) == (world["alex"], 3)
    event = TaskEvent.objects.get(task=task)
    assert event.actor_kind == "user" and event.actor_label.startswith("user:")


def test_events_cannot_be_deleted_or_changed(world):
    event = TaskEvent.objects.filter(task=world["mine"]).first()
    client = world["client"]
    assert client.get(f"/admin/tasks/taskevent/{event.pk}/delete/").status_code == 403
    response = client.post(f"/admin/tasks/taskevent/{event.pk}/change/", {"message": "x"})
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.message != "x"


def test_webhook_deliveries_and_failures_are_visible(world):
    response = world["client"].get("/admin/tasks/webhookdelivery/")
    assert response.status_code == 200 and b"HTTP 500" in response.content


def change_data(task, **extra):
    return {
        "title": task.title,
        "description": "",
        "required_expertise": "",
        "urgency": task.urgency,
        "deadline": "",
        **INLINE_FORMS,
        **extra,
    }


def test_reassigning_on_the_change_form_goes_through_the_rules(world):
    client, mine = world["client"], world["mine"]
    url = f"/admin/tasks/task/{mine.pk}/change/"
    response = client.post(url, change_data(mine, assign_to=world["full"].pk))
    assert response.status_code == 200 and b"capacity_exceeded" in response.content
    paused = make_agent(world["ours"], "agent-paused", is_paused=True)
    response = client.post(url, change_data(mine, assign_to=paused.pk))
    assert response.status_code == 200 and b"agent_offline" in response.content
    mine.refresh_from_db()
    assert mine.assignee == world["alex"]
    free = make_agent(world["ours"], "agent-free")
    response = client.post(url, change_data(mine, assign_to=free.pk))
    assert response.status_code == 302, response.content[:2000]
    mine.refresh_from_db()
    assert (mine.assignee, mine.delegation_chain) == (free, ["agent-alex", "agent-free"])
    event = TaskEvent.objects.filter(task=mine).latest("pk")
    assert (event.kind, event.actor_kind) == ("assigned", "user")


def test_the_change_form_offers_only_the_tasks_organization_and_keeps_it(world):
    client, mine = world["client"], world["mine"]
    response = client.get(f"/admin/tasks/task/{mine.pk}/change/")
    assert b"agent-alex" in response.content and b"agent-stranger" not in response.content
    stranger = Task.objects.get(pk=world["hidden"].pk).assignee
    response = client.post(
        f"/admin/tasks/task/{mine.pk}/change/", change_data(mine, assign_to=stranger.pk)
    )
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    mine.refresh_from_db()
    assert (mine.assignee, mine.organization) == (world["alex"], world["ours"])


def test_the_organization_filter_offers_only_the_users_organizations(world):
    third = make_org("third")
    user = make_admin_user(world["ours"])
    Membership.objects.create(user=user, organization=third, is_admin=True)
    client = Client()
    client.force_login(user)
    response = client.get("/admin/tasks/task/")
    assert response.status_code == 200
    assert b"Third" in response.content and b"Theirs" not in response.content


def test_tasks_cannot_be_deleted_in_the_admin(world):
    client, mine = world["client"], world["mine"]
    assert client.get(f"/admin/tasks/task/{mine.pk}/delete/").status_code == 403
    response = client.post(
        "/admin/tasks/task/", {"action": "delete_selected", "_selected_action": [mine.pk]}
    )
    assert Task.objects.filter(pk=mine.pk).exists()
    assert response.status_code == 302  # "No action selected": delete_selected is not offered


def test_a_refused_move_leaves_no_trace_not_even_the_metadata_or_a_log_entry(world):
    from django.contrib.admin.models import LogEntry

    client, mine = world["client"], world["mine"]
    url = f"/admin/tasks/task/{mine.pk}/change/"
    response = client.post(url, change_data(mine, title="Renamed", assign_to=world["full"].pk))
    assert response.status_code == 200 and b"capacity_exceeded" in response.content
    # The form is shown again with what was typed.
    assert b'value="Renamed"' in response.content
    mine.refresh_from_db()
    assert (mine.title, mine.assignee) == ("Our task", world["alex"])
    assert not LogEntry.objects.exists()
    response = client.post(url, change_data(mine, title="Renamed"))
    assert response.status_code == 302
    mine.refresh_from_db()
    assert (mine.title, mine.assignee) == ("Renamed", world["alex"])
    assert LogEntry.objects.count() == 1


def test_assign_to_searches_the_tasks_organization_instead_of_listing_its_agents(world):
    client = world["client"]
    page = client.get(f"/admin/tasks/task/{world['mine'].pk}/change/").content.decode()
    assert f"/admin/autocomplete/?org_scope={world['ours'].pk}" in page
    assert "agent-full" not in page  # no option per agent
    found = client.get(
        "/admin/autocomplete/",
        {
            "app_label": "tasks",
            "model_name": "task",
            "field_name": "assignee",
            "term": "agent",
            "org_scope": world["ours"].pk,
        },
    ).json()
    ids = {int(r["id"]) for r in found["results"]}
    assert world["alex"].pk in ids and world["full"].pk in ids
    assert not Task.objects.filter(assignee_id__in=ids, organization__slug="theirs").exists()


@pytest.fixture
def searched():
    """Tasks each matching a search by one field: title, description, holder, queue."""
    ours, theirs = make_org("searched"), make_org("elsewhere")
    sam = make_agent(ours, "agent-sam-invoicer")
    kim = make_agent(ours, "agent-kim")
    stranger = make_agent(theirs, "agent-invoicing")
    rows = {
        "title": Task(organization=ours, title="Pay the Invoice", status="completed"),
        "description": Task(
            organization=ours, title="Bills", description="the INVOICE of May", status="failed"
        ),
        "holder": Task(organization=ours, title="Held", status="assigned", assignee=sam),
        "queue": Task(organization=ours, title="Waits", status="queued", queued_for=sam),
        "phrase": Task(organization=ours, title="an invoice 100% paid", status="assigned"),
        "other": Task(organization=ours, title="Unrelated", status="assigned", assignee=kim),
        "theirs": Task(
            organization=theirs, title="Their invoice", status="assigned", assignee=stranger
        ),
    }
    Task.objects.bulk_create(rows.values())
    client = Client()
    client.force_login(make_admin_user(ours))
    return {"ours": ours, "rows": rows, "client": client}


def listed(client, **params) -> set[int]:
    response = client.get("/admin/tasks/task/", params)
    assert response.status_code == 200
    return {task.pk for task in response.context["cl"].result_list}


@pytest.mark.parametrize(
    "term, found",
    [
        ("invoice", ["title", "description", "holder", "queue", "phrase"]),
        ("INVOICER", ["holder", "queue"]),
        ("invoice bills", ["description"]),
        ('"invoice 100%"', ["phrase"]),
        ("100%", ["phrase"]),
        ("agent-kim", ["other"]),
        ("nowhere", []),
    ],
)
def test_the_search_matches_title_description_holder_and_queue(searched, term, found):
    rows = searched["rows"]
    assert listed(searched["client"], q=term) == {rows[name].pk for name in found}


@pytest.mark.parametrize("term", ["invoice", "INVOICER", "invoice bills", '"invoice 100%"', "_"])
def test_the_search_finds_what_the_admins_own_search_finds(searched, term):
    """`get_search_results` reads through indexes what `search_fields` would find by a join."""
    from django.contrib import admin
    from django.contrib.admin import ModelAdmin

    model_admin = admin.site._registry[Task]
    tasks = Task.objects.filter(organization=searched["ours"])
    ours, _ = model_admin.get_search_results(None, tasks, term)
    stock, _ = ModelAdmin.get_search_results(model_admin, None, tasks, term)
    assert set(ours) == set(stock)


def test_a_searched_list_answers_in_as_many_queries_as_the_list(
    searched, django_assert_num_queries
):
    client = searched["client"]
    listed(client)  # the session row exists from now on
    with CaptureQueriesContext(connection) as plain:
        listed(client)
    with django_assert_num_queries(len(plain)):
        assert listed(client, q="invoice")
    with django_assert_num_queries(len(plain)):
        assert listed(client, attention="needs") is not None


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")
def test_a_search_is_planned_for_its_pattern_however_often_it_runs(searched):
    """Its statements are never prepared (a generic plan would serve any pattern), and the
    connection prepares the others again afterwards."""
    client, rows = searched["client"], searched["rows"]
    threshold = connection.connection.prepare_threshold if connection.connection else None
    for _ in range(8):
        assert listed(client, q="invoicer") == {rows["holder"].pk, rows["queue"].pk}
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert not any("LIKE" in statement for statement in prepared), prepared
    assert threshold is None or connection.connection.prepare_threshold == threshold
