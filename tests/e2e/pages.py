"""What the browser tests do on every admin page: log in, check nothing scrolls sideways, keep a
full-page screenshot under var/screenshots/ for a person to look at."""

from django.conf import settings
from playwright.sync_api import expect

SCREENSHOTS = settings.BASE_DIR / "var" / "screenshots"
WIDTHS = (1440, 1280)
# Every admin list, for a superuser who sees several organizations (the organization's column too).
LISTS = [
    "tasks/task",
    "organization/agent",
    "runtime/run",
    "collaboration/collaborationsession",
    "tasks/taskevent",
    "tasks/webhookdelivery",
    "organization/team",
    "organization/apikey",
    "organization/organization",
    "costs/usagerecord",
    "costs/budget",
]


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


def no_word_broken(page) -> None:
    """No word of a list's cells is split over two lines, at either width: each run of letters
    and digits keeps to one line box (a break at a space, a hyphen or a slash is fine)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        broken = page.evaluate(
            """(() => {
              const cut = [];
              const cells = document.querySelectorAll('#result_list td, #result_list th');
              for (const cell of cells) {
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                  for (const m of node.data.matchAll(/[\\p{L}\\p{N}]+/gu)) {
                    const range = document.createRange();
                    range.setStart(node, m.index);
                    range.setEnd(node, m.index + m[0].length);
                    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                    if (tops.size > 1) cut.push(m[0]);
                  }
                }
              }
              return cut;
            })()"""
        )
        assert not broken, f"{page.url} cuts words at {width} px: {broken[:10]}"
