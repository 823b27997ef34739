"""What the browser tests do on every admin page: log in, check nothing scrolls sideways, keep a
full-page screenshot under var/screenshots/ for a person to look at."""

from django.conf import settings
from playwright.sync_api import expect

SCREENSHOTS = settings.BASE_DIR / "var" / "screenshots"
WIDTHS = (1440, 1280)


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests-only")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_contain_text("Agent Org")


def no_horizontal_overflow(page) -> None:
    """Neither the page nor a list's table (Django scrolls `.results` inside itself) scrolls."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll, client = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert scroll <= client, f"{page.url} scrolls sideways at {width} px ({scroll} > {client})"
        table = page.evaluate(
            "(() => { const r = document.querySelector('#changelist .results');"
            " return r ? [r.scrollWidth, r.clientWidth] : [0, 0]; })()"
        )
        assert table[0] <= table[1], f"{page.url}: the list scrolls at {width} px {table}"


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
