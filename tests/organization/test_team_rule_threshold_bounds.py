"""The organization page's stale-queue thresholds (team rules inline): a value the service cannot
use must be a form error, not a saved row that breaks the dashboard and the stale sweep."""

import pytest

from organization.models import TeamRule
from tasks.sweep import sweep_stale_queued
from tests.factories import make_admin_user
from tests.organization.test_admin import change_url, form_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("value", ["999999999 00:00:00", "-999999999 00:00:00"])
def test_a_threshold_no_timestamp_can_hold_is_a_form_error_not_a_broken_sweep(client, demo, value):
    """docs/design.md: "Never a 500 for bad input"; docs/admin.md: the organization page edits
    the stale-queue thresholds, and the dashboard's `stale_queued` counts what the sweep
    escalates. The TeamRule inline (organization/admin/organizations.py TeamRuleInline, model
    TeamRule's DurationFields) accepts any duration Python holds, e.g. 999,999,999 days. It is
    saved, and then `now - threshold` (tasks/sweep.py stale_queued) is out of PostgreSQL's
    timestamp range: the admin's index (dashboard) answers 500 and the beat's stale sweep —
    one query over *every* organization — raises DataError, so one organization's staff admin
    stops stale escalation for all tenants."""
    client.raise_request_exception = False  # a 500 is an answer here, not an exception
    client.force_login(make_admin_user(demo))  # a staff admin of this organization only
    url = change_url(demo)
    data = form_of(client, url, "organization_form")
    data["team_rule-0-stale_after_low"] = value
    response = client.post(url, data)
    saved = TeamRule.objects.get(organization=demo).stale_after_low
    if response.status_code == 200:
        assert "stale_after_low" in response.content.decode()  # shown as a form error
    # Whatever was saved, the dashboard and the sweep still work.
    dashboard = client.get("/admin/")
    assert dashboard.status_code == 200, f"dashboard {dashboard.status_code} with {saved}"
    sweep_stale_queued()


@pytest.mark.parametrize("value", ["0", "-00:00:01", "3651 00:00:00"])
def test_a_threshold_out_of_bounds_is_named_in_the_form(client, demo, value):
    """The bounds (docs/tasks.md): from 1 second to 3650 days; the row keeps its old value."""
    client.force_login(make_admin_user(demo))
    url = change_url(demo)
    before = TeamRule.objects.get(organization=demo).stale_after_high
    data = form_of(client, url, "organization_form")
    data["team_rule-0-stale_after_high"] = value
    response = client.post(url, data)
    assert response.status_code == 200
    assert "At least 1 second" in response.content.decode() or "At most 3650 days" in (
        response.content.decode()
    )
    assert TeamRule.objects.get(organization=demo).stale_after_high == before


def test_a_row_stored_out_of_bounds_breaks_neither_the_dashboard_nor_the_sweep(client, demo):
    """A row written past the validators (stored before them, or by `QuerySet.update`) is
    clamped to the bounds by the sweep's query."""
    from datetime import timedelta

    TeamRule.objects.filter(organization=demo).update(
        stale_after_low=timedelta(days=999_999_999), stale_after_high=-timedelta(days=999_999_999)
    )
    client.force_login(make_admin_user(demo))
    assert client.get("/admin/").status_code == 200
    sweep_stale_queued()
