"""The manager's console in a real browser (issue 13 §4): the dashboard's numbers against the
database, no horizontal scrolling at 1440 and 1280 px, and a full-page screenshot of each page
at 1440×900 under var/screenshots/ (left on disk for a person to look at)."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from console import metrics
from tests.console.data import build
from tests.e2e.pages import LISTS, log_in, no_horizontal_overflow, screenshot
from tests.factories import make_admin_user, make_org

pytestmark = pytest.mark.e2e


@pytest.fixture
def console_org(transactional_db):
    """Built before the browser starts (see test_admin_org_chart.py)."""
    org = make_org("acme", "Acme Robotics")
    build(org)
    rival = make_org("rival", "Rival")
    build(rival, prefix="r")
    make_admin_user(org, username="bob")
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    # What the database says, metric by metric, computed before the browser runs.
    expected = {m.name: m.text(m.value(org)) for m in metrics.METRICS}
    attention = [m.name for m in metrics.METRICS if m.group == metrics.ATTENTION]
    expected["needs_attention"] = str(sum(int(expected[n]) for n in attention))
    return org, rival, expected


def test_the_dashboard_shows_the_databases_numbers_and_each_leads_to_its_list(
    live_server, console_org, page
):
    org, rival, expected = console_org
    log_in(page, live_server.url, "bob")
    for name, text in expected.items():
        expect(page.locator(f'[data-metric="{name}"]')).to_have_text(text)
    distinct = {k: v for k, v in expected.items() if k != "cost_today_usd"}
    assert len(set(distinct.values())) == len(distinct), "each metric non-zero and distinct"
    assert "0" not in expected.values()
    no_horizontal_overflow(page)
    screenshot(page, "dashboard")

    page.locator('[data-metric="escalated"]').click()
    expect(page.locator("#result_list tbody tr")).to_have_count(int(expected["escalated"]))
    page.go_back()
    page.locator('[data-metric="at_capacity"]').click()
    expect(page.locator("#result_list tbody tr")).to_have_count(int(expected["at_capacity"]))


def test_a_superuser_switches_organization_and_finds_django_models_under_system(
    live_server, console_org, page
):
    org, rival, expected = console_org
    log_in(page, live_server.url, "root")
    page.select_option("#id_organization", label="Rival")
    expect(page.locator("h1")).to_contain_text("Rival")
    page.reload()
    expect(page.locator("h1")).to_contain_text("Rival")  # remembered
    expect(page.locator("details.system")).not_to_have_attribute("open", "")
    page.locator("details.system summary").click()
    expect(page.locator("details.system .app-auth")).to_be_visible()
    no_horizontal_overflow(page)
    screenshot(page, "dashboard-superuser")


@pytest.fixture
def demo_with_vote(transactional_db):
    from tasks.demo import seed_demo
    from tests.console.data import a_vote

    org = seed_demo(slug="demo")
    make_admin_user(org, username="bob")
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    session = a_vote(org, started_at=None)
    escalated = org.tasks.get(status="escalated")
    story = org.tasks.get(title="Set up a staging cluster")
    taker = org.agents.filter(is_paused=False).order_by("handle").first()
    return {"org": org, "session": session, "escalated": escalated, "story": story, "taker": taker}


@pytest.fixture
def demo_in_trouble(demo_with_vote):
    """Jordan held by an exhausted budget and with a failing webhook (its senior, Sam, is
    offline in the demo)."""
    from costs.metering import current_period
    from costs.models import Budget
    from tasks.models import DeliveryStatus, WebhookDelivery

    org = demo_with_vote["org"]
    jordan = org.agents.get(handle="agent-jordan")
    Budget.objects.create(
        organization=org,
        scope="agent",
        agent=jordan,
        limit_usd=1,
        spent_usd=1,
        period=current_period(),
    )
    WebhookDelivery.objects.create(
        organization=org, agent=jordan, url="https://hooks.example/j", status=DeliveryStatus.FAILED
    )
    return {**demo_with_vote, "jordan": jordan}


def test_an_escalated_task_is_assigned_from_its_banner(live_server, demo_with_vote, page):
    data = demo_with_vote
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/tasks/task/{data['escalated'].pk}/change/")
    banner = page.locator("#attention-banner")
    expect(banner).to_contain_text("Escalated by agent-jordan")
    expect(banner.locator(".banner-why")).to_contain_text("Needs the AWS account owner")
    no_horizontal_overflow(page)
    screenshot(page, "task-escalated")

    page.fill("#banner-comment textarea", "Sam is back on Monday: <b>wait</b> for him.")
    page.click("#banner-comment button")
    expect(page.locator(".messagelist")).to_contain_text("Comment added")
    expect(page.locator("#comments")).to_contain_text("<b>wait</b>")
    row = page.locator(f'tr.suggestion[data-agent="{data["taker"].handle}"]')
    if row.count():
        row.get_by_role("button", name="Assign").click()
        expect(page.locator(".messagelist")).to_contain_text("Assigned to")
        expect(page.locator("#attention-banner")).to_have_count(0)


def test_an_escalated_task_is_queued_for_its_full_expert_from_its_banner(
    live_server, demo_with_vote, page
):
    from tasks.models import TaskStatus

    task = demo_with_vote["escalated"]
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/tasks/task/{task.pk}/change/")
    first = page.locator("#attention-banner tr.suggestion").first
    expect(first).to_have_attribute("data-agent", "agent-jordan")
    expect(first.get_by_role("button", name="Assign")).to_have_count(0)
    first.get_by_role("button", name="Queue for them").click()
    expect(page.locator(".messagelist")).to_contain_text("Queued for Jordan")
    expect(page.locator("#attention-banner")).to_have_count(0)
    expect(page.locator("#timeline")).to_contain_text("queued the task for agent-jordan")
    task.refresh_from_db()
    assert (task.status, task.queued_for.handle) == (TaskStatus.QUEUED, "agent-jordan")


def test_a_task_page_tells_its_story(live_server, demo_with_vote, page):
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/tasks/task/{demo_with_vote['story'].pk}/change/")
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text("delegated the task to agent-jordan")
    expect(timeline).to_contain_text("Fallback: Sam (Infrastructure Lead) when back.")
    no_horizontal_overflow(page)
    screenshot(page, "task-story")


def test_a_collaboration_opens_on_its_outcome(live_server, demo_with_vote, page):
    log_in(page, live_server.url, "bob")
    session = demo_with_vote["session"]
    page.goto(f"{live_server.url}/admin/collaboration/collaborationsession/{session.pk}/change/")
    expect(page.locator("#verdict-summary")).to_have_text("2 yes, 1 no — 67 % agreement")
    expect(page.locator("#dissent")).to_contain_text("agent-c (no)")
    expect(page.locator("article.agent-card")).to_have_count(3)
    expect(page.locator("input[name=_save]")).to_have_count(0)
    no_horizontal_overflow(page)
    screenshot(page, "collaboration")


def test_an_agent_page_opens_on_its_live_state(live_server, demo_in_trouble, page):
    jordan = demo_in_trouble["jordan"]
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/organization/agent/{jordan.pk}/change/")
    live = page.locator("#agent-live")
    expect(live.locator('[data-live="workload"]')).to_have_text("5")
    expect(live.locator("#agent-load .pill")).to_have_text("Busy")
    expect(page.locator("#agent-held tbody tr")).to_have_count(5)
    warnings = page.locator("#agent-warnings")
    expect(warnings).to_contain_text("Its senior, Sam (agent-sam), is offline")
    expect(warnings).to_contain_text("Paused for budget")
    expect(warnings).to_contain_text("Its webhook fails: 1 delivery(ies)")
    expect(warnings).to_contain_text("At capacity (5/5)")
    expect(page.locator("#agent-budgets")).to_contain_text("Exhausted")
    expect(page.locator("#agent-decisions")).to_contain_text("Raise the AWS account limits")
    expect(page.locator("input[name=_save]")).to_have_count(1)  # the settings, after
    no_horizontal_overflow(page)
    screenshot(page, "agent")


def test_the_org_chart_groups_by_team_folds_and_flags_offline_supervisors(
    live_server, demo_with_vote, page
):
    org = demo_with_vote["org"]
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/organization/organization/{org.pk}/org-chart/")
    expect(page.locator("#offline-supervisors")).to_contain_text("Sam (Infrastructure)")
    expect(page.locator("details.team > summary .team-name")).to_have_text(
        ["Leadership", "Design", "Development", "Infrastructure"]
    )
    sam = page.locator("#agent-agent-sam")
    expect(sam.locator(".org-flag").first).to_have_text("Offline with 2 reports")
    no_horizontal_overflow(page)
    screenshot(page, "org-chart")

    page.click("#collapse-all")
    expect(page.locator("#agent-agent-jordan")).not_to_be_visible()
    page.locator("#offline-supervisors a.jump").click()  # the flag leads to the card, unfolded
    expect(sam.locator(".org-card").first).to_be_visible()
    expect(page.locator("#agent-agent-jordan")).not_to_be_visible()  # Sam's own fold stays shut
    page.click("#expand-all")
    expect(page.locator("#agent-agent-jordan")).to_be_visible()


@pytest.mark.parametrize("changelist", LISTS)
def test_the_lists_fit_the_window(live_server, demo_with_vote, page, changelist):
    make_org("second", "Second")  # a superuser sees several: the organization column too
    log_in(page, live_server.url, "root")
    page.goto(f"{live_server.url}/admin/{changelist}/")
    expect(page.locator("#changelist")).to_be_visible()
    screenshot(page, "list-" + changelist.replace("/", "-"))
    no_horizontal_overflow(page)
