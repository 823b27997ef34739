"""Money on the console: the lists' cost columns (console/admin.py), the dashboard's cost today
and its spenders panel, as the ledger has them."""

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from collaboration.models import CollaborationSession
from tasks.models import (
    Task,
)
from tests.console.data import usage_record
from tests.factories import make_agent, make_org


def _usage(org, cost, **fields):
    record = usage_record(org, cost, **fields)
    record.save()
    return record


def _sorted_by_cost_descending(client, url):
    """The list at `url` sorted by its cost column, costliest first (as a click on the
    column header twice does)."""
    columns = list(client.get(url).context["cl"].list_display)
    index = columns.index("cost")
    return list(client.get(url, {"o": f"-{index}"}).context["cl"].result_list)


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


def test_the_spenders_panel_links_to_the_report_of_the_organization_shown(root_client, db):
    make_org("acme", "Acme")  # first by name: where the report opens by default
    zeta = make_org("zeta", "Zeta")
    spender = make_agent(zeta, "agent-zed")
    _usage(zeta, "0.5", agent=spender)
    html = root_client.get(reverse("admin:index"), {"organization": zeta.pk}).content.decode()
    panel = html.split('id="panel-top_spenders"')[1]
    assert 'data-spender="agent-zed"' in panel
    report = re.search(r'<a href="([^"]+)">Costs by agent', panel).group(1).replace("&amp;", "&")
    response = root_client.get(report)
    assert response.status_code == 200
    assert response.context["organization"] == zeta


def test_the_spenders_panel_shows_money_as_the_console_does(root_client, db):
    org = make_org("acme", "Acme")
    big, small = make_agent(org, "agent-big"), make_agent(org, "agent-small")
    for agent, cost in ((big, "24.6914"), (small, "0.01234")):
        _usage(org, cost, agent=agent)
    html = root_client.get(reverse("admin:index"), {"organization": org.pk}).content.decode()
    panel = html.split('id="panel-top_spenders"')[1].split("</table>")[0]
    cells = dict(
        re.findall(r'data-spender="([^"]+)">.*?<td>\d+</td>\s*<td>([^<]*)</td>', panel, re.S)
    )
    assert cells == {"agent-big": "24.69", "agent-small": "0.0123"}
