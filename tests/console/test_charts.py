"""The dashboard's charts: the month's cost per day and the load (held / capacity) of the last
days, drawn on the server as SVG from the ledger and the tasks' audit trail, in a fixed number
of queries, every text escaped."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from console import charts
from costs.models import PriceSource, UsagePurpose, UsageRecord
from tasks import services
from tasks.models import Task
from tests.factories import make_admin_user, make_agent, make_org

pytestmark = pytest.mark.django_db
INDEX = "/admin/"


def human(org):
    from organization.caller import caller_for_member
    from tasks.rules import Actor

    return Actor.of(caller_for_member(make_admin_user(org), org))


def _spend(org, agent, cost, when):
    record = UsageRecord.objects.create(
        organization=org,
        agent=agent,
        purpose=UsagePurpose.RUN,
        provider="openai",
        model="gpt-4o",
        cost_usd=Decimal(cost),
        price_source=PriceSource.GENAI_PRICES,
    )
    UsageRecord.objects.filter(pk=record.pk).update(created_at=when)


def bars(html: str, name: str) -> list[str]:
    svg = re.search(rf'<svg class="chart" id="chart-{name}".*?</svg>', html, re.S).group(0)
    return re.findall(r"<title>([^<]*)</title>", svg)


@pytest.fixture
def acme():
    org = make_org("acme", "Acme <b>Robotics</b>")
    return org


def test_the_cost_chart_has_a_bar_per_day_of_the_month_with_its_total(client, acme):
    alex = make_agent(acme, "agent-alex")
    today = timezone.now()
    _spend(acme, alex, "1.25", today)
    _spend(acme, alex, "0.75", today)
    if today.day > 1:
        _spend(acme, alex, "0.004", today.replace(day=1, hour=12))
    _spend(acme, alex, "99", today - timedelta(days=40))  # last month: not drawn
    _spend(make_org("rival"), None, "50", today)  # another organization: not drawn
    client.force_login(make_admin_user(acme))
    html = client.get(INDEX).content.decode()
    said = bars(html, "cost")
    assert len(said) == today.day
    assert said[-1].endswith(": $2.00")
    if today.day > 1:
        assert said[0].endswith(": $0.004")
    assert 'id="chart-card-cost"' in html


def test_the_load_chart_counts_tasks_held_at_each_days_end_against_capacity(client, acme):
    alex = make_agent(acme, "agent-alex", workload_capacity=3)
    make_agent(acme, "agent-sam", workload_capacity=4, is_paused=True)  # offline: no capacity
    actor = human(acme)
    held = [
        services.task_create(org=acme, actor=actor, title=f"t{i}", assignee=alex) for i in range(3)
    ]
    # One was held from three days ago to yesterday: its events moved back in time.
    first = held[0]
    services.task_set_status(task=first, actor=actor, status="in_progress")
    services.task_set_status(task=Task.objects.get(pk=first.pk), actor=actor, status="completed")
    events = list(first.events.order_by("pk"))
    now = timezone.now()
    for event, days_ago in zip(events, (3, 2, 1), strict=True):
        type(event).objects.filter(pk=event.pk).update(created_at=now - timedelta(days=days_ago))
    client.force_login(make_admin_user(acme))
    said = bars(client.get(INDEX).content.decode(), "load")
    assert len(said) == charts.LOAD_DAYS + 1  # the bars, then the capacity line
    counts = [int(re.search(r": (\d+) held", s).group(1)) for s in said[:-1]]
    assert counts[-1] == 2  # today: two still held
    assert counts[-4] == 1 and counts[-3] == 1 and counts[-2] == 0  # the first one's days
    assert counts[0] == 0
    assert said[-1] == "capacity 3"


def test_the_charts_escape_what_they_show_and_cost_a_fixed_number_of_queries(
    client, acme, django_assert_num_queries
):
    for n, org in enumerate((acme, make_org("big"))):
        agents = [make_agent(org, f"agent-{org.slug}-{i}") for i in range(2 + 30 * n)]
        actor = human(org)
        for i in range(3 + 100 * n):
            services.task_create(
                org=org, actor=actor, title=f"t{i}", assignee=agents[i % len(agents)]
            )
        with django_assert_num_queries(charts.QUERIES):
            drawn = charts.dashboard_charts(org)
        assert "<script" not in drawn["cost"] and "<b>" not in drawn["load"]


def test_the_load_chart_keeps_settled_days_and_reads_today_from_the_tasks(
    acme, django_assert_num_queries
):
    alex = make_agent(acme, "agent-alex", workload_capacity=3)
    actor = human(acme)
    task = services.task_create(org=acme, actor=actor, title="t", assignee=alex)
    task.events.update(created_at=timezone.now() - timedelta(days=3))
    first, _ = charts.load_per_day(acme)
    # A row written into a settled day afterwards (never done: the trail is append-only) is not
    # read again: the past days were counted once.
    task.events.update(created_at=timezone.now() - timedelta(days=5))
    with django_assert_num_queries(2):
        again, _ = charts.load_per_day(acme)
    assert [b.value for b in again] == [b.value for b in first]
    assert first[-1].value == 1 and first[-4].value == 1 and first[-6].value == 0
