"""A real headless Chromium (Debian's package) driving the admin through pytest-django's live_server."""

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(autouse=True)
def allow_sync_orm_next_to_playwright(monkeypatch):
    """Playwright's sync API runs an event loop in the test's thread; the ORM calls the test makes
    around it are still plain synchronous calls, so Django's async-safety guard must stand aside
    (DJANGO_ALLOW_ASYNC_UNSAFE=true) — for the e2e tests only, not the rest of the suite."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def browser():
    """Function-scoped on purpose: sync Playwright keeps an asyncio loop running in this thread
    while it is open, and later tests that call asyncio.run() (MCP) would fail under it."""
    if not Path(CHROMIUM).exists():
        message = (
            f"Chromium not found at {CHROMIUM} (apt-get install -y chromium; `make test` does)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        # With Playwright's loop running in this thread, asgiref's Local (Django's connections)
        # keeps this thread's connections per context, apart from the thread's own: the ORM
        # calls the test made meanwhile opened one that pytest-django's teardown never sees. It
        # outlived the test and held the test database, which could not be dropped at the end.
        from django.db import connections

        connections.close_all()
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()
