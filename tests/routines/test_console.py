"""The console's dashboard lists the routines: next run, last occurrence and its outcome."""

import pytest

from tests.factories import make_admin_user

pytestmark = pytest.mark.django_db


def dashboard(client, org) -> str:
    client.force_login(make_admin_user(org))
    return client.get("/admin/", {"organization": org.pk}).content.decode()


def row_of(html: str, routine: dict) -> str:
    panel = html.split('id="panel-routines"')[1].split("</table>")[0]
    return panel.split(f'data-routine="{routine["id"]}"')[1].split("</tr>")[0]


def test_the_dashboard_shows_each_routines_next_run_and_last_outcome(client, cast):
    ran = cast.routine(title="Dependency review")
    task = cast.run(ran).json()["task"]
    never = cast.routine(title="Backups", team="Ops", required_expertise="Redis")
    off = cast.routine(title="Paused one", agent="agent-alex", enabled=False)

    html = dashboard(client, cast.org)

    row = row_of(html, ran)
    assert 'data-last-outcome="created"' in row and f"task {task}" in row
    assert ">in " in row.split("data-next-run")[1]  # "in 59 minutes"
    assert "never" in row_of(html, never)
    assert "disabled" in row_of(html, off)


def test_the_panel_never_shows_another_organizations_routines(client, cast):
    cast.routine(title="Dependency review")
    html = dashboard(client, cast.other)
    assert "Dependency review" not in html
    assert "No routine" in html.split('id="panel-routines"')[1]
