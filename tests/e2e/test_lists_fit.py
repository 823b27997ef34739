"""Every list fits a 1280 and a 1440 px window with a week's worth of real rows in it (the demo's
lists of runs, usage records and keys are empty), and no word in a column is cut mid-word."""

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.e2e.busy import make_busy
from tests.e2e.pages import LISTS, log_in, no_horizontal_overflow, no_word_broken, screenshot
from tests.factories import make_admin_user, make_org

pytestmark = pytest.mark.e2e


@pytest.fixture
def busy_demo(transactional_db):
    from tasks.demo import seed_demo

    org = seed_demo(slug="demo")
    make_busy(org)
    make_admin_user(org, username="bob")
    make_org("second", "Second")  # a superuser sees several: the organization column too
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    return org


@pytest.mark.parametrize("changelist", LISTS)
def test_a_busy_list_fits_the_window_with_no_word_cut(live_server, busy_demo, page, changelist):
    log_in(page, live_server.url, "root")
    page.goto(f"{live_server.url}/admin/{changelist}/")
    expect(page.locator("#changelist")).to_be_visible()
    assert page.locator("#result_list tbody tr").count() > 0
    screenshot(page, "busy-list-" + changelist.replace("/", "-"))
    no_horizontal_overflow(page)
    no_word_broken(page)


def test_a_run_page_reads_as_a_conversation_and_fits(live_server, busy_demo, page):
    from runtime.models import Run

    run = Run.objects.filter(organization=busy_demo).order_by("pk").first()
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/admin/runtime/run/{run.pk}/change/")
    talk = page.locator(".run-conversation")
    expect(talk.locator(".turn.model")).to_contain_text("I will check the task first.")
    expect(talk.locator(".tool-name")).to_have_text(["get_task", "complete_task"])
    folded = talk.locator("details.result")
    expect(folded.locator("pre")).not_to_be_visible()
    folded.locator("summary").click()
    expect(folded.locator("pre")).to_contain_text('"status": "completed"')
    expect(talk.locator(".turn.refused")).to_contain_text("Refused: It has open subtasks.")
    no_horizontal_overflow(page)
    screenshot(page, "run-conversation")


def test_the_dashboard_draws_its_charts(live_server, busy_demo, page):
    from django.utils import timezone

    log_in(page, live_server.url, "bob")
    expect(page.locator("#chart-cost .bar")).to_have_count(timezone.now().day)
    expect(page.locator("#chart-load .bar")).to_have_count(14)
    expect(page.locator("#chart-card-cost")).to_contain_text("so far")
    no_horizontal_overflow(page)
    screenshot(page, "dashboard-charts")
