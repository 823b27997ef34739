"""A manager sets a budget in the admin, reads costs by agent as bars and sees each budget's
spent / held / left bar (issue 12 §3); screenshots under var/screenshots/."""

from decimal import Decimal

import pytest
from playwright.sync_api import expect

from costs.budgets import budget_set
from organization.caller import caller_for_member
from tests.costs.conftest import hold, spend
from tests.e2e.pages import log_in, no_horizontal_overflow, screenshot
from tests.factories import make_admin_user, make_agent, make_org, make_team

pytestmark = pytest.mark.e2e


@pytest.fixture
def spending_org(transactional_db, settings):
    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(1), "output": Decimal(2)}}
    org = make_org("acme", "Acme")
    team = make_team(org, "Platform")
    alice = make_agent(org, "agent-alice", name="Alice <Lead>", team=team)
    bob = make_agent(org, "agent-bob", name="Bob", team=team)
    user = make_admin_user(org, username="manager")
    budget_set(
        caller=caller_for_member(user, org), scope="team", team="Platform", limit_usd="0.012"
    )
    for agent, tokens in ((alice, 2000), (bob, 500), (alice, 1000)):
        spend(agent, tokens, tokens)
    hold(bob, prompt_bound=100, max_tokens=100)
    return org


def test_manager_reads_costs_and_sets_a_budget(live_server, spending_org, page):
    log_in(page, live_server.url, "manager")

    page.goto(f"{live_server.url}/admin/costs/usagerecord/report/?group_by=agent")
    rows = page.locator(".cost-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("agent-alice")  # the costliest first
    expect(rows.nth(0)).to_contain_text("$0.009")  # 3,000 in + 3,000 out tokens
    expect(page.locator("[data-metric=period_cost_usd]")).to_contain_text("$0.0105")
    no_horizontal_overflow(page)
    screenshot(page, "costs-by-agent")

    page.goto(f"{live_server.url}/admin/costs/budget/")
    expect(page.locator(".budget-bar")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text("warning")  # $0.0105 of $0.012
    expect(page.locator("#result_list")).to_contain_text("held")
    no_horizontal_overflow(page)
    screenshot(page, "budgets")

    page.goto(f"{live_server.url}/admin/costs/budget/add/")
    page.select_option("#id_scope", "organization")
    page.fill("#id_limit_usd", "250")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_be_visible()
    page.goto(f"{live_server.url}/admin/costs/budget/")
    expect(page.locator("#result_list")).to_contain_text("$250.00 / month")
