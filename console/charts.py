"""The dashboard's pictures, small SVG bar charts drawn here (no script, nothing fetched): the
month's cost per day, and the load over the last days as the tasks' audit trail tells it."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.core.cache import cache
from django.db.models import Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from costs.models import UsageRecord
from costs.money import usd
from costs.selectors import MONEY_ZERO, start_of_day, start_of_month
from organization.models import Organization
from organization.workload import held_statuses

from .sql import held_now_and_intervals

# What `dashboard_charts` costs, whatever the organization's size: the month's costs, the held
# stretches, the capacity.
QUERIES = 3
# How many days the load chart covers (today included).
LOAD_DAYS = 14
WIDTH, HEIGHT, TOP, BOTTOM = 560, 150, 18, 20
# A past day's count is kept once its end is this far behind: the trail is append-only, so it
# never changes after, but a transaction begun before the end may still be writing its row.
SETTLED = timedelta(hours=1)


def _n(number: float) -> str:
    """A coordinate as SVG takes it (format_html escapes its arguments to text first)."""
    return f"{number:.1f}"


@dataclass(frozen=True)
class Bar:
    label: str  # under the bar (a day of the month)
    value: float
    said: str  # the bar's tooltip and its text for a screen reader


def bar_chart(
    bars: list[Bar], *, name: str, title: str, line: float | None = None, line_said: str = ""
) -> SafeString:
    """`bars` side by side, scaled to the tallest (or to `line`, a dashed level across)."""
    top = max([b.value for b in bars] + [line or 0, 0]) or 1
    plot = HEIGHT - TOP - BOTTOM
    step = WIDTH / max(len(bars), 1)
    gap = min(4.0, step / 4)

    def y(value: float) -> float:
        return TOP + plot - plot * value / top

    rects = format_html_join(
        "",
        '<g class="bar"><rect x="{}" y="{}" width="{}" height="{}" rx="2">'
        "<title>{}</title></rect></g>",
        (
            (
                _n(i * step + gap / 2),
                _n(y(b.value)),
                _n(step - gap),
                _n(max(plot * b.value / top, 0)),
                b.said,
            )
            for i, b in enumerate(bars)
        ),
    )
    # A label under every bar when they fit, else under every few.
    every = 1 if step >= 22 else (2 if step >= 11 else 5)
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle">{}</text>',
        (
            (_n(i * step + step / 2), HEIGHT - 6, b.label)
            for i, b in enumerate(bars)
            if i % every == 0 or i == len(bars) - 1
        ),
    )
    level = (
        format_html(
            '<line class="level" x1="0" x2="{}" y1="{}" y2="{}"><title>{}</title></line>'
            '<text class="level-text" x="{}" y="{}" text-anchor="end">{}</text>',
            WIDTH,
            _n(y(line)),
            _n(y(line)),
            line_said,
            WIDTH - 2,
            _n(y(line) - 4),
            line_said,
        )
        if line is not None
        else ""
    )
    return format_html(
        '<svg class="chart" id="chart-{}" viewBox="0 0 {} {}" role="img" aria-label="{}" '
        'xmlns="http://www.w3.org/2000/svg">'
        '<line class="axis" x1="0" x2="{}" y1="{}" y2="{}"></line>{}{}{}</svg>',
        name,
        WIDTH,
        HEIGHT,
        title,
        WIDTH,
        TOP + plot,
        TOP + plot,
        rects,
        level,
        labels,
    )


def cost_per_day(org: Organization) -> tuple[list[Bar], Decimal]:
    """Each day of the month so far and what the ledger's calls cost on it (one query), and
    the month's total."""
    first = start_of_month()
    totals = dict(
        UsageRecord.objects.filter(organization=org, created_at__gte=first)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(total=Coalesce(Sum("cost_usd"), MONEY_ZERO))
        .values_list("day", "total")
    )
    today = timezone.localdate()
    bars = []
    for n in range(today.day):
        day = first.date() + timedelta(days=n)
        total = totals.get(day, Decimal(0))
        said = f"{date_format(day, 'M j')}: {usd(total)}"
        bars.append(Bar(str(day.day), float(total), said))
    return bars, sum(totals.values(), Decimal(0))


def _held_key(org: Organization, end) -> str:
    # The organization's creation time tells a database made again from the one it replaced.
    return f"console:held:{org.pk}:{org.created_at.timestamp()}:{end.timestamp()}"


def held_at_ends(org: Organization, ends: list, now) -> list[int]:
    """Tasks held at each of `ends` (the last is `now`) in one query: the past ones from the
    audit trail, kept in the cache once settled (a big organization's trail is millions of rows),
    the last from the tasks themselves (the trail's last row is its task's state)."""
    keys = {end: _held_key(org, end) for end in ends[:-1]}
    kept = cache.get_many(list(keys.values()))
    missing = [end for end, key in keys.items() if key not in kept]
    held, intervals = held_now_and_intervals(
        organization_id=org.pk, since=min(missing, default=None), statuses=held_statuses()
    )
    counted = {
        end: sum(1 for begun, until in intervals if begun <= end and (until is None or until > end))
        for end in missing
    }
    settled = {keys[end]: n for end, n in counted.items() if end <= now - SETTLED}
    if settled:
        cache.set_many(settled, timeout=int(timedelta(days=LOAD_DAYS + 1).total_seconds()))
    return [kept.get(keys[end], counted.get(end)) for end in ends[:-1]] + [held]


def load_per_day(org: Organization, days: int = LOAD_DAYS) -> tuple[list[Bar], int]:
    """Tasks held at the end of each of the last `days` days (now, for today) (one query), and
    the capacity of the agents online now (one query)."""
    now = timezone.now()
    since = start_of_day() - timedelta(days=days - 1)
    starts = [since + timedelta(days=n) for n in range(days)]
    ends = [min(start + timedelta(days=1), now) for start in starts]
    counts = held_at_ends(org, ends, now)
    capacity = (
        org.agents.filter(is_paused=False).aggregate(total=Sum("workload_capacity"))["total"] or 0
    )
    bars = []
    for start, count in zip(starts, counts, strict=True):
        day = timezone.localtime(start).date()
        bars.append(
            Bar(str(day.day), count, f"{date_format(day, 'M j')}: {count} held of {capacity}")
        )
    return bars, capacity


def dashboard_charts(org: Organization) -> dict:
    """The dashboard's two charts, as SVG ready for the page (three queries)."""
    costs, month_total = cost_per_day(org)
    load, capacity = load_per_day(org)
    return {
        "cost": bar_chart(costs, name="cost", title="Cost per day this month"),
        "cost_total": usd(month_total),
        "load": bar_chart(
            load,
            name="load",
            title=f"Tasks held per day, last {LOAD_DAYS} days",
            line=capacity,
            line_said=f"capacity {capacity}",
        ),
        "load_now": load[-1].value if load else 0,
        "capacity": capacity,
        "load_days": LOAD_DAYS,
    }
