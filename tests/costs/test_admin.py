"""Budgets in the admin go through the same service as the API: another organization's subject
is a form error, and removing a budget wakes the managed agents it held."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from costs.budgets import budget_made_room, budget_set
from costs.models import Budget
from organization.caller import caller_for_member
from tasks.models import Task
from tests.factories import make_admin_user

from .conftest import admin_delete

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@x.io", "pw"))
    return client


def test_a_subject_of_another_organization_is_a_form_error(root_client, cast):
    theirs = Task.objects.create(organization=cast.other, title="theirs")
    response = root_client.post(
        "/admin/costs/budget/add/",
        {
            "organization": cast.org.pk,
            "scope": "task",
            "task": theirs.pk,
            "limit_usd": "5",
        },
    )
    assert response.status_code == 200
    assert "is not of Acme" in response.content.decode()
    assert not Budget.objects.exists()


def test_a_budget_added_in_the_admin_is_the_services(root_client, cast):
    response = root_client.post(
        "/admin/costs/budget/add/",
        {
            "organization": cast.org.pk,
            "scope": "agent",
            "agent": cast.alex.pk,
            "limit_usd": "5",
        },
    )
    assert response.status_code == 302
    budget = Budget.objects.get()
    assert (budget.agent, budget.period, budget.created_by) == (
        cast.alex,
        budget.period,
        "user:root",
    )
    assert len(budget.period) == 7  # a monthly budget's "YYYY-MM"


@pytest.mark.parametrize("how", ["page", "action"])
def test_removing_a_budget_in_the_admin_tells_the_runtime(root_client, cast, how):
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget, _ = budget_set(caller=caller, scope="organization", limit_usd="0")
    told = []

    def receiver(sender, organization_id, **kwargs):
        told.append(organization_id)

    budget_made_room.connect(receiver, dispatch_uid="test-admin-delete")
    try:
        response = admin_delete(root_client, "/admin/costs/budget/", budget.pk, how)
    finally:
        budget_made_room.disconnect(dispatch_uid="test-admin-delete")
    assert response.status_code == 302
    assert not Budget.objects.exists()
    assert told == [cast.org.pk]


def test_a_staff_member_cannot_read_another_organizations_task_through_the_form(client, cast):
    """The budget's task is a raw-id box: Django's own names whatever row the id finds."""
    theirs = Task.objects.create(organization=cast.other, title="Their merger plan")
    ours = Task.objects.create(organization=cast.org, title="Our launch plan")
    client.force_login(make_admin_user(cast.org))

    for task, shown in ((theirs, False), (ours, True)):
        page = client.get(f"/admin/costs/budget/add/?scope=task&task={task.pk}")
        assert page.status_code == 200
        assert (task.title in page.content.decode()) is shown

    answers = []
    for pk in (theirs.pk, 10**9):  # another organization's task, and no task at all
        response = client.post(
            "/admin/costs/budget/add/",
            {
                "organization": cast.org.pk,
                "scope": "task",
                "task": pk,
                "limit_usd": "5",
            },
        )
        assert response.status_code == 200
        answers.append(response.context["adminform"].form.errors.get("task"))
    assert answers[0] == answers[1] and answers[0]
    assert not Budget.objects.exists()


def test_marking_alerts_read_says_how_many_and_touches_only_the_users_organization(client, cast):
    from costs.models import BudgetAlert

    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    ours, _ = budget_set(caller=caller, scope="organization", limit_usd="5")
    theirs, _ = budget_set(
        caller=caller_for_member(make_admin_user(cast.other), cast.other),
        scope="organization",
        limit_usd="5",
    )
    alerts = [
        BudgetAlert.objects.create(
            organization=budget.organization,
            budget=budget,
            kind="warning",
            period="2026-01",
            message="80 %",
        )
        for budget in (ours, theirs)
    ]
    client.force_login(make_admin_user(cast.org))
    response = client.post(
        "/admin/costs/budgetalert/",
        {
            "action": "mark_read",
            "_selected_action": [a.pk for a in alerts],
            "index": 0,
        },
        follow=True,
    )
    assert response.status_code == 200
    assert "Marked 1 alert as read." in response.content.decode()
    read = dict(BudgetAlert.objects.values_list("pk", "read_at"))
    assert read[alerts[0].pk] is not None and read[alerts[1].pk] is None
    again = client.post(
        "/admin/costs/budgetalert/",
        {
            "action": "mark_read",
            "_selected_action": [alerts[0].pk],
            "index": 0,
        },
        follow=True,
    )
    assert "No alert to mark: those selected were read already." in again.content.decode()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's plans")
def test_the_usage_lists_sort_and_unpriced_count_have_indexes(db):
    """The ledger grows by a row per model call: the admin's list (newest first, a superuser's
    across organizations) and its count of unpriced calls, read on every load, are index
    reads, not a scan and sort of the whole ledger (the planner is told to avoid scans, as it
    would at size: a plan that still scans has no index to use)."""
    from costs.models import PriceSource, UsageRecord

    newest = UsageRecord.objects.order_by("-created_at", "-pk")[:100]
    unpriced = UsageRecord.objects.filter(
        organization_id__in=[1, 2], price_source=PriceSource.UNKNOWN
    )
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            assert "usage_created" in newest.explain()
            assert "usage_unpriced" in unpriced.explain()
        finally:
            cursor.execute("RESET enable_seqscan")
