"""The admin pages hold what a busy human may type or accumulate: a date drill-down past year
9999, texts longer than the API allows, an agent holding hundreds of tasks, a run woken by many
triggers, an organization of many members — and the dashboard's links keep its organization."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.urls import reverse

from tasks.demo import ESCALATED
from tasks.models import (
    DESCRIPTION_MAX_LENGTH,
    NOTE_MAX_LENGTH,
    Task,
    TaskEvent,
    TaskStatus,
)
from tests.factories import give_tasks, make_agent, make_org


def queries_of(client, url) -> int:
    """How many SQL statements a GET of `url` runs (once warm)."""
    client.get(url)
    seen = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert client.get(url).status_code == 200
    return len(seen)


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client


# --- 1. date_hierarchy links past year 9999 answer 500 ---------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "created_at__year=9999",
        "created_at__year=9999&created_at__month=12",
        "created_at__year=9999&created_at__month=12&created_at__day=31",
    ],
)
def test_collaboration_list_date_hierarchy_at_year_9999_is_not_a_500(root_client, query):
    url = reverse("admin:collaboration_collaborationsession_changelist")
    response = root_client.get(f"{url}?{query}")
    # Django answers a bad date hierarchy with its "?e=1" redirect (IncorrectLookupParameters).
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_usage_record_list_date_hierarchy_at_year_9999_is_not_a_500(root_client):
    url = reverse("admin:costs_usagerecord_changelist")
    response = root_client.get(f"{url}?created_at__year=9999")
    assert response.status_code == 302 and response["Location"].endswith("?e=1")
    assert root_client.get(f"{url}?created_at__year=2026").status_code == 200


# --- 2. the banner's Cancel stores a reason of any length (REST caps it at NOTE_MAX_LENGTH) --


def test_the_banner_cancel_refuses_a_reason_longer_than_the_api_allows(root_client, demo):
    task = Task.objects.get(organization=demo, title=ESCALATED[1])
    reason = "x" * (NOTE_MAX_LENGTH * 50)  # 100,000 characters
    response = root_client.post(
        reverse("admin:tasks_task_console_cancel", args=[task.pk]), {"reason": reason}
    )
    assert response.status_code == 302
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages == [f"A reason holds at most {NOTE_MAX_LENGTH} characters."]
    task.refresh_from_db()
    assert task.status == TaskStatus.ESCALATED
    assert not TaskEvent.objects.filter(task=task, reasoning=reason).exists()


# --- 3. the task add form stores a description of any length (REST caps DESCRIPTION_MAX_LENGTH)


def test_the_task_form_refuses_a_description_longer_than_the_api_allows(root_client, db):
    org = make_org("acme")
    response = root_client.post(
        reverse("admin:tasks_task_add"),
        {
            "organization": org.pk,
            "title": "Too long",
            "description": "x" * (DESCRIPTION_MAX_LENGTH + 1),
            "required_expertise": "",
            "urgency": "normal",
            "deadline": "",
            "assign_to": "",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert not Task.objects.filter(organization=org, title="Too long").exists()


# --- 4. the agent's live state lists every task it holds, not its latest 10 ------------------


def test_the_agent_page_lists_at_most_ten_held_tasks(root_client, db):
    org = make_org("acme")
    agent = make_agent(org, "agent-big", workload_capacity=50)
    give_tasks(agent, 30)
    response = root_client.get(reverse("admin:organization_agent_change", args=[agent.pk]))
    assert response.status_code == 200
    held = response.content.decode().split('id="agent-held"')[1].split('id="agent-queue"')[0]
    assert held.count("/admin/tasks/task/") - 1 == 10  # minus the "All its tasks" link
    assert "Holds (30)" in held


# --- 5. the dashboard's "Top spenders" panel links to the report of another organization ----


def test_the_spenders_panel_links_to_the_report_of_the_organization_shown(root_client, db):
    from decimal import Decimal

    from costs.models import UsageRecord

    make_org("acme", "Acme")  # first by name: where the report opens by default
    zeta = make_org("zeta", "Zeta")
    spender = make_agent(zeta, "agent-zed")
    UsageRecord.objects.create(
        organization=zeta,
        agent=spender,
        purpose="run",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=Decimal("0.5"),
        price_source="genai-prices",
    )
    html = root_client.get(reverse("admin:index"), {"organization": zeta.pk}).content.decode()
    panel = html.split('id="panel-top_spenders"')[1]
    assert 'data-spender="agent-zed"' in panel
    report = re.search(r'<a href="([^"]+)">Costs by agent', panel).group(1).replace("&amp;", "&")
    response = root_client.get(report)
    assert response.status_code == 200
    assert response.context["organization"] == zeta


# --- 6. a run's page reads each trigger's task and run again (N+1) ---------------------------


def _run_with_triggers(org, runner, waker, n):
    from runtime.models import Run, RunStatus, RunTrigger

    run = Run.objects.create(
        organization=org, agent=runner, trigger="comment", status=RunStatus.COMPLETED
    )
    other = Run.objects.create(
        organization=org, agent=waker, trigger="assigned", status=RunStatus.COMPLETED
    )
    for i in range(n):
        task = Task.objects.create(organization=org, title=f"t{run.pk}-{i}")
        RunTrigger.objects.create(
            organization=org, agent=runner, run=run, task=task, trigger="comment", woken_by=other
        )
    return run


def test_a_run_page_answers_in_as_many_queries_for_2_and_40_triggers(
    root_client, db, django_assert_max_num_queries
):
    org = make_org("acme")
    runner, waker = make_agent(org, "agent-boss"), make_agent(org, "agent-helper")
    small = _run_with_triggers(org, runner, waker, 2)
    big = _run_with_triggers(org, runner, waker, 40)
    bound = queries_of(root_client, reverse("admin:runtime_run_change", args=[small.pk]))
    big_url = reverse("admin:runtime_run_change", args=[big.pk])
    root_client.get(big_url)
    with django_assert_max_num_queries(bound):
        assert root_client.get(big_url).status_code == 200


# --- 7. an organization's page reads each member's user and organization again (N+1) --------


def test_an_organization_page_answers_in_as_many_queries_for_2_and_30_members(
    root_client, db, django_assert_max_num_queries
):
    from tests.factories import make_admin_user

    small, big = make_org("small"), make_org("big")
    for org, n in ((small, 2), (big, 30)):
        for i in range(n):
            make_admin_user(org, username=f"{org.slug}-{i}")
    bound = queries_of(
        root_client, reverse("admin:organization_organization_change", args=[small.pk])
    )
    big_url = reverse("admin:organization_organization_change", args=[big.pk])
    root_client.get(big_url)
    with django_assert_max_num_queries(bound):
        assert root_client.get(big_url).status_code == 200


# --- 6. the agent page's "all" links list that agent's own rows, not a same handle's ---------


def test_the_agent_pages_links_list_its_own_acts_and_runs_only(root_client, db):
    """A superuser's agent page links to all the agent's acts and runs by its row: a search of
    its handle also listed the runs and events of another organization's agent-a."""
    import re

    from runtime.models import Run

    mine, theirs = (make_agent(make_org(slug), "agent-a") for slug in ("acme", "zeta"))
    for agent in (mine, theirs):
        give_tasks(agent, 1)
        Run.objects.create(organization=agent.organization, agent=agent, trigger="assigned")
        TaskEvent.objects.create(
            organization=agent.organization,
            task=agent.held_tasks.first(),
            kind="status_changed",
            actor_agent=agent,
        )
    page = root_client.get(reverse("admin:organization_agent_change", args=[mine.pk]))
    html = page.content.decode()
    for anchor, model in (("agent-acts-link", TaskEvent), ("agent-runs-link", Run)):
        url = re.search(rf'href="([^"]+)" id="{anchor}"', html).group(1).replace("&amp;", "&")
        listed = root_client.get(url)
        assert listed.status_code == 200, (anchor, listed.status_code)
        shown = {row.pk for row in listed.context["cl"].result_list}
        owner = "actor_agent" if model is TaskEvent else "agent"
        assert shown == set(model.objects.filter(**{owner: mine}).values_list("pk", flat=True))
        assert shown


def test_the_spenders_panel_shows_money_as_the_console_does(root_client, db):
    from decimal import Decimal

    from costs.models import UsageRecord

    org = make_org("acme", "Acme")
    big, small = make_agent(org, "agent-big"), make_agent(org, "agent-small")
    for agent, cost in ((big, "24.6914"), (small, "0.01234")):
        UsageRecord.objects.create(
            organization=org,
            agent=agent,
            purpose="run",
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal(cost),
            price_source="genai-prices",
        )
    html = root_client.get(reverse("admin:index"), {"organization": org.pk}).content.decode()
    panel = html.split('id="panel-top_spenders"')[1].split("</table>")[0]
    cells = dict(
        re.findall(r'data-spender="([^"]+)">.*?<td>\d+</td>\s*<td>([^<]*)</td>', panel, re.S)
    )
    assert cells == {"agent-big": "24.69", "agent-small": "0.0123"}
