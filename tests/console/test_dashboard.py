"""The admin index is the manager's dashboard (issue 13 §1): each count, its link, whose
organization it is, and a bounded number of queries whatever the organization's size."""

import re
from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from console import charts, metrics
from console.dashboard import SESSION_KEY
from organization.models import Agent, Membership
from tasks.models import Task, TaskStatus
from tests.factories import make_admin_user, make_org

from .data import EXPECTED, build

INDEX = reverse("admin:index")
# The metrics this app registers (the costs app adds budget_alerts and the two costs).
OURS = [
    "decisions_waiting",
    "escalated",
    "blocked",
    "stale_queued",
    "failed_sessions",
    "failed_runs",
    "held_wakes",
    "failing_webhooks",
    "at_capacity",
    "offline_with_work",
]


def numbers(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-metric="([a-z_]+)">([^<]*)<', html))


def links(html: str) -> dict[str, str]:
    """metric name → the href of the card around it."""
    found = re.findall(
        r'<a class="[^"]*" href="([^"]+)">\s*<span class="num" data-metric="([a-z_]+)"', html
    )
    return {name: href.replace("&amp;", "&") for href, name in found}


@pytest.fixture
def org(db):
    org = make_org("acme", "Acme")
    build(org)
    return org


@pytest.fixture
def rival(db):
    """Another organization with every kind of row: none of them may count for Acme."""
    rival = make_org("rival", "Rival")
    build(rival, prefix="r")
    return rival


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw")


def test_the_registry_holds_our_metrics_in_order_and_refuses_a_name_twice():
    names = [m.name for m in metrics.METRICS]
    assert names[: len(OURS)] == OURS
    with pytest.raises(ValueError):
        metrics.register(metrics.Metric("escalated", "x", len, str, metrics.ATTENTION))
    with pytest.raises(ValueError):
        metrics.register(metrics.Metric("new", "x", len, str, "nowhere"))


def test_each_metric_counts_its_organization_only(org, rival):
    for metric in metrics.METRICS:
        if metric.name in EXPECTED:
            assert metric.value(org) == EXPECTED[metric.name], metric.name


def test_the_dashboard_shows_each_number_and_their_sum(client, root, org, rival):
    client.force_login(root)
    html = client.get(INDEX, {"organization": org.pk}).content.decode()
    shown = numbers(html)
    for name in [*OURS, "held_for_budget", "needs_attention"]:
        assert shown[name] == str(EXPECTED[name]), name
    assert "Agent Org" in html


@pytest.mark.parametrize("name", [*OURS, "held_for_budget"])
def test_each_number_links_to_the_list_that_holds_as_many_rows(client, root, org, rival, name):
    client.force_login(root)
    href = links(client.get(INDEX, {"organization": org.pk}).content.decode())[name]
    assert parse_qs(urlparse(href).query)["organization__exact"] == [str(org.pk)]
    listing = client.get(href)
    assert listing.status_code == 200, href
    assert listing.context["cl"].result_count == EXPECTED[name], href


def test_needs_attention_links_to_the_tasks_that_need_a_human(client, root, org, rival):
    client.force_login(root)
    href = links(client.get(INDEX, {"organization": org.pk}).content.decode())["needs_attention"]
    listed = client.get(href).context["cl"].result_count
    reasons = ("escalated", "blocked", "held_for_budget", "held_wakes")
    assert listed == sum(EXPECTED[reason] for reason in reasons)


def test_a_superuser_picks_the_organization_and_the_choice_is_remembered(client, root, org, rival):
    client.force_login(root)
    first = client.get(INDEX)  # no choice yet: the first by name (Acme)
    assert first.context["organization"] == org
    picked = client.get(INDEX, {"organization": rival.pk})
    assert picked.context["organization"] == rival
    assert client.session[SESSION_KEY] == rival.pk
    again = client.get(INDEX)
    assert again.context["organization"] == rival
    assert 'id="organization-choice"' in again.content.decode()
    # Rival's numbers are Rival's own (the same cast, so the same counts).
    Task.objects.filter(organization=rival, status=TaskStatus.ESCALATED).delete()
    assert numbers(client.get(INDEX).content.decode())["escalated"] == "0"


def test_staff_see_only_the_organizations_they_administer(client, org, rival):
    bob = make_admin_user(org, username="bob")
    client.force_login(bob)
    page = client.get(INDEX, {"organization": rival.pk})  # not his: ignored
    assert page.context["organization"] == org
    assert page.context["organizations"] == [org]
    assert 'id="organization-choice"' not in page.content.decode()
    assert numbers(page.content.decode())["escalated"] == str(EXPECTED["escalated"])
    assert client.session.get(SESSION_KEY) is None
    # Nor do his links show him anything of Rival's.
    href = links(page.content.decode())["escalated"].replace(
        f"organization__exact={org.pk}", f"organization__exact={rival.pk}"
    )
    assert client.get(href).context["cl"].result_count == 0


def test_staff_of_two_organizations_choose_between_them(client, org, rival):
    bob = make_admin_user(org, username="bob")
    Membership.objects.create(user=bob, organization=rival, is_admin=True)
    client.force_login(bob)
    assert client.get(INDEX, {"organization": rival.pk}).context["organization"] == rival


def test_staff_without_an_organization_get_an_empty_dashboard(client, db):
    client.force_login(make_admin_user(None, username="nobody"))
    page = client.get(INDEX)
    assert page.status_code == 200
    assert page.context["organization"] is None
    assert "data-metric" not in page.content.decode()


def test_djangos_own_models_are_under_system_for_superusers_only(client, root, org):
    client.force_login(root)
    html = client.get(INDEX).content.decode()
    system = html.split('<details class="system">')[1]
    assert "app-auth" in system and "app-django_celery_beat" in system
    manage = html.split('<details class="system">')[0]
    assert "app-auth" not in manage and "app-tasks" in manage
    client.force_login(make_admin_user(org, username="bob"))
    assert '<details class="system">' not in client.get(INDEX).content.decode()


def test_the_site_is_titled_and_view_site_leads_to_the_front_page(client, root, db):
    client.force_login(root)
    page = client.get(INDEX)
    assert page.context["site_header"] == "Agent Org"
    assert page.context["site_url"] == "/"


def test_user_text_is_escaped(client, root, org):
    Task.objects.filter(organization=org, status=TaskStatus.ESCALATED).update(
        title="<script>alert(1)</script>"
    )
    org.name = "<b>Acme</b>"
    org.save()
    client.force_login(root)
    html = client.get(INDEX).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>Acme</b>" not in html


def _big_org(size_agents: int, size_tasks: int):
    org = make_org(f"big-{size_agents}")
    agents = Agent.objects.bulk_create(
        Agent(organization=org, handle=f"agent-b{i}", name=f"B {i}", is_paused=i % 20 == 0)
        for i in range(size_agents)
    )
    statuses = [
        TaskStatus.ASSIGNED,
        TaskStatus.QUEUED,
        TaskStatus.ESCALATED,
        TaskStatus.BLOCKED,
        TaskStatus.COMPLETED,
    ]
    Task.objects.bulk_create(
        Task(
            organization=org,
            title=f"t{i}",
            status=statuses[i % len(statuses)],
            assignee=agents[i % size_agents] if i % 5 in (0, 3) else None,
            queued_for=agents[i % size_agents] if i % 5 == 1 else None,
        )
        for i in range(size_tasks)
    )
    return org


def test_the_dashboard_answers_in_as_many_queries_for_200_agents_and_5000_tasks(
    client, root, django_assert_max_num_queries
):
    small, big = _big_org(5, 20), _big_org(200, 5_000)
    client.force_login(root)
    client.get(INDEX, {"organization": small.pk})  # the session row exists from now on
    # Session + user, the organizations, one query per metric and per panel, the charts', and
    # the session save (an UPDATE within a savepoint: three statements).
    bound = 3 + len(metrics.METRICS) + len(metrics.PANELS) + charts.QUERIES + 3
    for org in (small, big):
        with django_assert_max_num_queries(bound):
            page = client.get(INDEX, {"organization": org.pk})
        assert page.status_code == 200
    assert numbers(page.content.decode())["escalated"] == "1000"


def test_at_capacity_counts_as_the_workload_rule_does(org, rival):
    """The count groups the held tasks once; it agrees with `at_capacity` agent by agent,
    an agent of capacity 0 holding nothing included."""
    from organization.workload import at_capacity, workload_subquery
    from tests.factories import give_tasks, make_agent

    make_agent(org, "agent-zero", workload_capacity=0)
    give_tasks(make_agent(org, "agent-paused-full", workload_capacity=2, is_paused=True), 2)
    give_tasks(make_agent(org, "agent-blocked", workload_capacity=1), 1, TaskStatus.BLOCKED)
    give_tasks(make_agent(org, "agent-done", workload_capacity=1), 3, TaskStatus.COMPLETED)
    metric = next(m for m in metrics.METRICS if m.name == "at_capacity")
    agents = Agent.objects.filter(organization=org).annotate(current_workload=workload_subquery())
    assert metric.value(org) == at_capacity(agents).count() == EXPECTED["at_capacity"] + 3
