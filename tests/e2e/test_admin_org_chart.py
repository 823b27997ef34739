"""A staff member builds part of the hierarchy in the admin and sees it on the org chart."""

import re

import pytest
from playwright.sync_api import expect

from tasks.demo import seed_demo
from tests.factories import make_admin_user

pytestmark = pytest.mark.e2e


def pick(page, field: str, term: str, choice: str) -> None:
    """Choose `choice` in the select2 autocomplete of `field`, as a person would."""
    page.locator(f".field-{field} .select2-selection").click()
    page.locator(".select2-container--open .select2-search__field").fill(term)
    page.locator(".select2-results__option", has_text=choice).click()


@pytest.fixture
def demo_with_staff_member(transactional_db):
    """Built before the browser starts: ORM calls made while Playwright's loop runs would open a
    connection of their own that nothing closes, and it would hold the test database."""
    org = seed_demo(slug="demo")
    make_admin_user(org, username="bob")
    return org


def test_staff_member_adds_a_team_and_an_agent_and_sees_it_on_the_org_chart(
    live_server, demo_with_staff_member, page
):

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", "pw-for-tests-only")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()

    page.goto(f"{live_server.url}/admin/organization/team/add/")
    page.fill("#id_name", "Research")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("Research")

    page.goto(f"{live_server.url}/admin/organization/agent/add/")
    page.fill("#id_handle", "agent-robin")
    page.fill("#id_name", "Robin <R&D>")
    page.fill("#id_role", "Data Scientist")
    pick(page, "team", "Res", "Research")
    pick(page, "senior", "Ali", "Alice (agent-alice)")
    page.fill("#id_expertise", "Statistics\nPython")
    page.select_option("#id_hierarchy_role-0-role", "specialist")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("agent-robin")

    page.get_by_role("link", name="Org chart").click()
    expect(page).to_have_url(re.compile(r"/org-chart/$"))
    # Robin heads the Research team's tree and names the senior he reports to, in Leadership.
    research = page.locator("details.team", has=page.locator("summary", has_text="Research"))
    robin = research.locator("#agent-agent-robin")
    expect(robin).to_be_visible()
    expect(robin).to_contain_text("Robin <R&D>")
    expect(robin).to_contain_text("Data Scientist · Research · specialist")
    expect(robin.locator(".reports-to")).to_have_text("Reports to Alice (Leadership)")
    expect(robin.locator(".agent-status-idle")).to_have_text("Idle")
    expect(robin.locator(".workload")).to_have_text("0/5")
    expect(robin.locator(".expertise")).to_contain_text("Statistics")
