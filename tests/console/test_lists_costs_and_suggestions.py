"""The console's lists and banner: cost columns sorted and labelled as they count, suggestions
that can take the task, money as the ledger has it, and odd lookups in a list's query string."""

import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from collaboration.models import CollaborationSession
from costs.models import UsageRecord
from tasks.models import Task, TaskStatus
from tests.factories import give_tasks, make_agent, make_org


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client


def _usage(org, cost, **fields):
    return UsageRecord.objects.create(
        organization=org,
        purpose="run",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=Decimal(cost),
        price_source="genai-prices",
        **fields,
    )


def _banner(client, task) -> str:
    response = client.get(reverse("admin:tasks_task_change", args=[task.pk]))
    assert response.status_code == 200
    return response.content.decode().split('id="attention-banner"')[1].split("</section>")[0]


def _sorted_by_cost_descending(client, url):
    """The list at `url` sorted by its cost column, costliest first (as a click on the
    column header twice does)."""
    columns = list(client.get(url).context["cl"].list_display)
    index = columns.index("cost")
    return list(client.get(url, {"o": f"-{index}"}).context["cl"].result_list)


# --- 1. the cost columns sort "no cost" above the costliest rows -----------------------------


@pytest.mark.parametrize("listing", ["tasks", "agents", "collaborations"])
def test_sorting_a_cost_column_costliest_first_puts_the_costliest_row_first(root_client, listing):
    """docs/admin.md: the tasks', agents' and collaborations' lists have a **sortable** cost
    column. Sorted costliest first, the costliest row must come first. The column is a bare
    correlated Sum subquery (console/admin.py: cost_of), NULL for a row with no model call, and
    PostgreSQL sorts NULLs first in DESC order: every row that cost nothing is listed above the
    ones that did, so a manager looking for what is expensive sees pages of "—" first."""
    org = make_org("acme")
    if listing == "tasks":
        rows = [Task.objects.create(organization=org, title=f"t{i}") for i in range(4)]
        _usage(org, "3", task=rows[1])
        _usage(org, "1", task=rows[2])
        url = reverse("admin:tasks_task_changelist")
    elif listing == "agents":
        rows = [make_agent(org, f"agent-{i}") for i in range(4)]
        _usage(org, "3", agent=rows[1])
        _usage(org, "1", agent=rows[2])
        url = reverse("admin:organization_agent_changelist")
    else:
        rows = [
            CollaborationSession.objects.create(
                organization=org,
                task=f"q{i}",
                status="completed",
                max_parallel=3,
                agent_timeout=60,
                max_total_tokens=1000,
            )
            for i in range(4)
        ]
        _usage(org, "3", session=rows[1])
        _usage(org, "1", session=rows[2])
        url = reverse("admin:collaboration_collaborationsession_changelist")
    listed = _sorted_by_cost_descending(root_client, url)
    assert listed[0].pk == rows[1].pk, [(r.pk, r.cost_usd) for r in listed]
    assert listed[1].pk == rows[2].pk, [(r.pk, r.cost_usd) for r in listed]


# --- 2. the banner's "least loaded agents online" misses agents with room --------------------


def test_the_banner_suggests_an_agent_with_room_even_behind_many_full_agents(root_client):
    """docs/admin.md: a task that asks for no expertise is offered "the least loaded agents
    online" (with room). console/banner.py: suggestions reads only the first 15 agents by
    workload and drops the full ones afterwards: when 15 small-capacity agents are full with
    one task each, an agent holding 2 of 5 is never read, and the banner says "Nobody online
    has room for it now" although someone has."""
    org = make_org("acme")
    for i in range(15):
        give_tasks(make_agent(org, f"agent-small-{i}", workload_capacity=1), 1)
    roomy = make_agent(org, "agent-roomy")  # capacity 5
    give_tasks(roomy, 2)
    task = Task.objects.create(organization=org, title="Anyone?", status=TaskStatus.ESCALATED)
    banner = _banner(root_client, task)
    assert 'data-agent="agent-roomy"' in banner
    assert "Nobody online has room" not in banner


# --- 3. the banner never offers "Assign" to experts who are full -----------------------------


def test_the_banner_offers_a_full_expert_a_queue_never_an_assign(root_client):
    """An expert at capacity can only refuse an assignment (409 capacity_exceeded): the banner
    offers to queue the task for them instead (`tasks_task_queue`), never *Assign*."""
    org = make_org("acme")
    full = make_agent(org, "agent-full", expertise=["PostgreSQL"], workload_capacity=2)
    give_tasks(full, 2)
    task = Task.objects.create(
        organization=org,
        title="Tune the database",
        status=TaskStatus.ESCALATED,
        required_expertise="PostgreSQL",
    )
    banner = _banner(root_client, task)
    row = banner.split('data-agent="agent-full"')[1].split("</tr>")[0]
    assert 'data-action="queue"' in row and "Queue for them" in row
    assert reverse("admin:tasks_task_queue", args=[task.pk]) in row
    assert reverse("admin:tasks_task_console_assign", args=[task.pk]) not in row


# --- 4. the dashboard's costs are rounded to cents -------------------------------------------


def test_the_dashboards_cost_today_is_the_ledgers_number_not_rounded_to_zero(
    root_client, org_client
):
    """docs/admin.md: each dashboard number is an element `data-metric="<name>"` whose text is
    the number; docs/costs.md: the totals show every amount with its decimals. A day of cheap
    calls ($0.0042, what GET /api/costs says) reads "0.00" on the dashboard
    (console/metrics.py: _money formats to 2 decimals) while the card is still coloured as
    non-zero; every other console page shows sub-dollar amounts to 4 decimals."""
    org = make_org("acme")
    agent = make_agent(org, "agent-a")
    _usage(org, "0.0042", agent=agent)
    api = org_client(org).get("/api/costs", {"group_by": "agent"}).json()
    api_total = sum(Decimal(row["cost_usd"]) for row in api)
    assert api_total == Decimal("0.0042")
    html = root_client.get(reverse("admin:index"), {"organization": org.pk}).content.decode()
    shown = dict(re.findall(r'data-metric="([a-z_]+)">([^<]*)<', html))
    assert Decimal(shown["cost_today_usd"].lstrip("$")) == api_total, shown["cost_today_usd"]
    assert Decimal(shown["cost_month_usd"].lstrip("$")) == api_total, shown["cost_month_usd"]


# --- 5. the tasks list's cost disagrees with the task's page and the API ---------------------


def test_the_task_lists_cost_column_says_it_is_the_tasks_own_and_the_page_adds_subtasks(
    root_client, org_client
):
    """A task's cost is "the task and all its subtasks" (docs/costs.md: GET /api/tasks/<id>
    `cost_usd`; the task's console page says the same). The tasks list's column is one
    correlated subquery a row, the calls on the task itself: titled "cost" it read $0.25 where
    the page and the API said $0.75; it is titled "own cost"."""
    org = make_org("acme")
    parent = Task.objects.create(organization=org, title="Parent")
    sub = Task.objects.create(organization=org, title="Sub", parent=parent)
    _usage(org, "0.5", task=sub)
    _usage(org, "0.25", task=parent)
    api = org_client(org).get(f"/api/tasks/{parent.pk}").json()
    assert Decimal(api["cost_usd"]) == Decimal("0.75")
    page = root_client.get(reverse("admin:tasks_task_change", args=[parent.pk])).content.decode()
    assert page.split('id="task-cost">')[1].startswith("$0.7500")
    response = root_client.get(reverse("admin:tasks_task_changelist"))
    row = next(t for t in response.context["cl"].result_list if t.pk == parent.pk)
    assert row.cost_usd == Decimal("0.25")
    headers = [h["text"] for h in response.context["result_headers"]]
    assert "own cost" in headers and "cost" not in headers


# --- 6. a list's query string can still answer 500 -------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("query", ["title__regex=(", "created_at__year=99999"])
def test_an_odd_lookup_in_the_task_lists_query_string_is_not_a_500(root_client, query):
    """Pages refuse bad input without a 500 (the project already turns a NUL into a 400 and a
    date drill-down past 9999 into Django's "?e=1" redirect: organization/admin/scoping.py
    _bounded_dates, tests/console/test_admin_limits.py). But any other lookup on a local field
    is passed to the database as is: an invalid regular expression (PostgreSQL DataError) or a
    year past 9999 (ValueError while compiling the SQL) raise while the list is counted,
    outside the ChangeList's own IncorrectLookupParameters handling — a 500."""
    org = make_org("acme")
    give_tasks(make_agent(org, "agent-a"), 1)
    root_client.raise_request_exception = False
    response = root_client.get(f"{reverse('admin:tasks_task_changelist')}?{query}")
    assert response.status_code != 500
    assert response.status_code in (200, 302, 400)


@pytest.mark.parametrize(
    "listing, field", [("tasks_task", "title"), ("organization_agent", "name")]
)
def test_an_invalid_regex_is_refused_before_sqlite_runs_it(
    root_client, monkeypatch, listing, field
):
    """SQLite runs REGEXP in Python and reports a bad pattern as an OperationalError (a 500 on
    `make run`): the admin compiles the pattern first and redirects with ?e=1, as for any bad
    filter. A valid one still filters."""
    from django.db import connection

    import organization.admin.scoping as scoping
    from tests.vendor import SaysItIs

    monkeypatch.setattr(scoping, "connection", SaysItIs(connection, "sqlite"))
    give_tasks(make_agent(make_org("acme"), "agent-a"), 1)
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__regex=(")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")
    assert root_client.get(f"{url}?{field}__iregex=.").status_code == 200


@pytest.mark.parametrize(
    "listing, field",
    [
        ("tasks_task", "delegation_chain"),
        ("organization_agent", "expertise"),
        ("organization_expertisegroup", "expertise"),
    ],
)
def test_a_lookup_the_database_cannot_run_is_refused_as_a_bad_filter(
    root_client, monkeypatch, listing, field
):
    """A JSON column's `__contains` runs on PostgreSQL but SQLite has none (Django raises
    NotSupportedError as the list is counted: a 500 on `make run`). The test database is made
    to refuse it as SQLite does: the list redirects with ?e=1, as for any bad filter."""
    from django.db import connection
    from django.db.models.fields.json import DataContains

    monkeypatch.setattr(connection.features, "supports_json_field_contains", False)
    monkeypatch.setattr(DataContains, "as_postgresql", DataContains.as_sql)
    give_tasks(make_agent(make_org("acme"), "agent-a"), 1)
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__contains=x")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")


@pytest.mark.django_db(transaction=True)  # PostgreSQL refuses the pattern: as in production
@pytest.mark.parametrize(
    "listing, field",
    [
        ("auth_user", "username"),
        ("django_celery_beat_periodictask", "name"),
    ],
)
def test_django_s_own_lists_refuse_a_bad_pattern_as_a_bad_filter(root_client, listing, field):
    """The superuser's pages of Django's own apps (users, periodic tasks) have the same guard as
    ours: an invalid pattern in the query string redirects with ?e=1 (it was a 500)."""
    url = reverse(f"admin:{listing}_changelist")
    refused = root_client.get(f"{url}?{field}__iregex=[")
    assert (refused.status_code, refused.url) == (302, f"{url}?e=1")
    assert root_client.get(url).status_code == 200
