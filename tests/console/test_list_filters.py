"""The admin lists' query strings: an odd lookup, a bad pattern or a date past year 9999 is a bad
filter or an empty page, never a 500."""

import pytest
from django.db import connection
from django.urls import reverse

from tests.factories import give_tasks, make_agent, make_org


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("query", ["title__regex=(", "created_at__year=99999"])
def test_an_odd_lookup_in_the_task_lists_query_string_is_not_a_500(root_client, query):
    """Django passes any other lookup on a local field to the database as is: an invalid
    regular expression (a DataError) or a year past 9999 (a ValueError compiling the SQL) raise
    while the list is counted, outside the ChangeList's own bad-filter handling."""
    org = make_org("acme")
    give_tasks(make_agent(org, "agent-a"), 1)
    root_client.raise_request_exception = False
    response = root_client.get(f"{reverse('admin:tasks_task_changelist')}?{query}")
    assert response.status_code != 500
    assert response.status_code in (200, 302, 400)


@pytest.mark.parametrize(
    "listing, field", [("tasks_task", "title"), ("organization_agent", "name")]
)
def test_an_invalid_regex_is_refused_before_sqlite_runs_it(
    root_client, monkeypatch, listing, field
):
    """SQLite runs REGEXP in Python and reports a bad pattern as an OperationalError (a 500 on
    `make run`): the admin compiles the pattern first and redirects with ?e=1, as for any bad
    filter. A valid one still filters."""

    import organization.admin.scoping as scoping
    from tests.vendor import SaysItIs

    monkeypatch.setattr(scoping, "connection", SaysItIs(connection, "sqlite"))
    give_tasks(make_agent(make_org("acme"), "agent-a"), 1)
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__regex=(")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")
    assert root_client.get(f"{url}?{field}__iregex=.").status_code == 200


@pytest.mark.parametrize(
    "listing, field",
    [
        ("tasks_task", "delegation_chain"),
        ("organization_agent", "expertise"),
        ("organization_expertisegroup", "expertise"),
    ],
)
def test_a_lookup_the_database_cannot_run_is_refused_as_a_bad_filter(
    root_client, monkeypatch, listing, field
):
    """A JSON column's `__contains` runs on PostgreSQL but SQLite has none (Django raises
    NotSupportedError as the list is counted: a 500 on `make run`). The test database is made
    to refuse it as SQLite does: the list redirects with ?e=1, as for any bad filter."""
    from django.db.models.fields.json import DataContains

    monkeypatch.setattr(connection.features, "supports_json_field_contains", False)
    monkeypatch.setattr(DataContains, "as_postgresql", DataContains.as_sql)
    give_tasks(make_agent(make_org("acme"), "agent-a"), 1)
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__contains=x")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")


@pytest.mark.django_db(transaction=True)  # PostgreSQL refuses the pattern: as in production
@pytest.mark.parametrize(
    "listing, field",
    [
        ("auth_user", "username"),
        ("django_celery_beat_periodictask", "name"),
    ],
)
def test_django_s_own_lists_refuse_a_bad_pattern_as_a_bad_filter(root_client, listing, field):
    """The superuser's pages of Django's own apps (users, periodic tasks) have the same guard as
    ours: an invalid pattern in the query string redirects with ?e=1 (it was a 500)."""
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__iregex=[")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")
    assert root_client.get(url).status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        "created_at__year=9999",
        "created_at__year=9999&created_at__month=12",
        "created_at__year=9999&created_at__month=12&created_at__day=31",
    ],
)
def test_collaboration_list_date_hierarchy_at_year_9999_is_not_a_500(root_client, query):
    url = reverse("admin:collaboration_collaborationsession_changelist")
    response = root_client.get(f"{url}?{query}")
    # Django answers a bad date hierarchy with its "?e=1" redirect (IncorrectLookupParameters).
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_usage_record_list_date_hierarchy_at_year_9999_is_not_a_500(root_client):
    url = reverse("admin:costs_usagerecord_changelist")
    response = root_client.get(f"{url}?created_at__year=9999")
    assert response.status_code == 302 and response["Location"].endswith("?e=1")
    assert root_client.get(f"{url}?created_at__year=2026").status_code == 200
