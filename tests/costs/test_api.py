"""The REST door of the ledger and the budgets: who may read and write what, exact codes."""

from decimal import Decimal

import pytest

from costs.budgets import budget_set
from costs.models import Budget, UsageRecord
from organization.caller import caller_for_member
from tasks.models import Task
from tests.factories import make_admin_user

from .conftest import auth, hold, spend

pytestmark = pytest.mark.django_db


def test_an_agent_reports_its_own_usage(client, cast):
    task = Task.objects.create(
        organization=cast.org, title="t", assignee=cast.alex, status="assigned"
    )
    body = {
        "provider": "openai",
        "model": "fake-model",
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "task": task.pk,
    }
    response = client.post(
        "/api/usage", body, content_type="application/json", **auth(cast.alex_key)
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["agent"] == "agent-alex" and data["self_reported"] is True
    assert data["purpose"] == "reported" and data["task"] == task.pk
    assert Decimal(data["cost_usd"]) == Decimal("0.002")


def test_usage_reports_need_an_agent_key_and_a_visible_task(client, cast):
    body = {"provider": "openai", "model": "fake-model", "prompt_tokens": 1, "completion_tokens": 1}
    org_key = client.post("/api/usage", body, content_type="application/json", **auth(cast.org_key))
    assert org_key.status_code == 403 and org_key.json()["code"] == "agent_required"
    theirs = Task.objects.create(organization=cast.other, title="theirs")
    response = client.post(
        "/api/usage",
        {**body, "task": theirs.pk},
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert response.status_code == 404
    assert response.json()["success"] is False
    naming = client.post(
        "/api/usage",
        {**body, "agentId": "agent-sarah"},
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert naming.status_code == 403 and naming.json()["code"] == "identity_mismatch"
    bad = client.post(
        "/api/usage",
        {**body, "prompt_tokens": -1},
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert UsageRecord.objects.count() == 0


def test_a_report_without_a_known_price_keeps_its_own_cost(client, cast):
    body = {
        "provider": "ollama",
        "model": "llama3",
        "prompt_tokens": 10,
        "completion_tokens": 10,
        "cost_usd": "0.5",
    }
    response = client.post(
        "/api/usage", body, content_type="application/json", **auth(cast.alex_key)
    )
    assert response.status_code == 201
    assert response.json()["price_source"] == "reported"
    assert Decimal(response.json()["cost_usd"]) == Decimal("0.5")


def test_a_tasks_cost_is_the_ledgers_sum_in_the_ledgers_own_precision(client, cast):
    """`GET /api/tasks/<id>` `cost_usd` (the task and its subtasks) reads as the ledger's column,
    nine decimals, on every database: SQLite (`make run`) sums decimals as floats, and the raw
    sum went out as Decimal(0.35000000000000003) — fifty-odd digits of binary noise."""
    task = Task.objects.create(
        organization=cast.org, title="t", assignee=cast.alex, status="assigned"
    )
    sub = Task.objects.create(
        organization=cast.org, title="s", assignee=cast.alex, status="assigned", parent=task
    )
    for cost, on in (("0.1", task), ("0.2", task), ("0.05", sub)):
        body = {
            "provider": "ollama",
            "model": "llama3",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "cost_usd": cost,
            "task": on.pk,
        }
        response = client.post(
            "/api/usage", body, content_type="application/json", **auth(cast.alex_key)
        )
        assert response.status_code == 201
    response = client.get(f"/api/tasks/{task.pk}", **auth(cast.org_key))
    assert response.status_code == 200
    assert response.json()["cost_usd"] == "0.350000000"
    assert client.get(f"/api/tasks/{sub.pk}", **auth(cast.org_key)).json()["cost_usd"] == (
        "0.050000000"
    )


def test_the_ledger_is_scoped_to_the_caller(client, cast):
    spend(cast.alex)
    spend(cast.sarah)
    spend(cast.bob)
    mine = client.get("/api/usage", **auth(cast.alex_key)).json()["results"]
    assert [row["agent"] for row in mine] == ["agent-alex"]
    everyone = client.get("/api/usage", **auth(cast.org_key)).json()["results"]
    assert sorted(row["agent"] for row in everyone) == ["agent-alex", "agent-sarah"]
    filtered = client.get("/api/usage?agent=agent-sarah", **auth(cast.org_key)).json()
    assert [row["agent"] for row in filtered["results"]] == ["agent-sarah"]
    assert client.get("/api/usage?purpose=nope", **auth(cast.org_key)).status_code == 400


def test_costs_grouped_by_agent_team_model_and_day(client, cast):
    spend(cast.alex)  # $0.003
    spend(cast.alex, prompt=1000, completion=0)  # $0.001
    spend(cast.morgan, prompt=0, completion=1000)  # $0.002
    spend(cast.bob)  # another organization
    rows = client.get("/api/costs?group_by=agent", **auth(cast.org_key)).json()
    assert rows == [
        {
            "key": "agent-alex",
            "prompt_tokens": 2000,
            "completion_tokens": 1000,
            "cost_usd": "0.004000000",
            "calls": 2,
        },
        {
            "key": "agent-morgan",
            "prompt_tokens": 0,
            "completion_tokens": 1000,
            "cost_usd": "0.002000000",
            "calls": 1,
        },
    ]
    teams = client.get("/api/costs?group_by=team", **auth(cast.org_key)).json()
    assert [(r["key"], r["calls"]) for r in teams] == [("Development", 2), (None, 1)]
    models = client.get("/api/costs?group_by=model", **auth(cast.org_key)).json()
    assert [(r["key"], r["calls"]) for r in models] == [("openai/fake-model", 3)]
    days = client.get("/api/costs?group_by=day", **auth(cast.org_key)).json()
    assert len(days) == 1 and days[0]["calls"] == 3
    own = client.get("/api/costs?group_by=agent", **auth(cast.alex_key)).json()
    assert [r["key"] for r in own] == ["agent-alex"]
    future = client.get(
        "/api/costs?group_by=agent&since=2999-01-01T00:00:00Z", **auth(cast.org_key)
    ).json()
    assert future == []
    past = client.get(
        "/api/costs?group_by=agent&until=2000-01-01T00:00:00Z", **auth(cast.org_key)
    ).json()
    assert past == []
    bad = client.get("/api/costs?group_by=planet", **auth(cast.org_key))
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert (
        client.get("/api/costs?group_by=agent&since=yesterday", **auth(cast.org_key)).status_code
        == 400
    )


def test_budgets_are_set_by_humans(client, cast):
    body = {"scope": "team", "team": "Development", "monthly_limit_usd": "50.00"}
    agent = client.post(
        "/api/budgets", body, content_type="application/json", **auth(cast.alex_key)
    )
    assert agent.status_code == 403 and agent.json()["code"] == "human_required"
    created = client.post(
        "/api/budgets", body, content_type="application/json", **auth(cast.org_key)
    )
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["scope"], data["team"], data["monthly_limit_usd"], data["state"]) == (
        "team",
        "Development",
        "50.000000000",
        "ok",
    )
    changed = client.post(
        "/api/budgets",
        {**body, "monthly_limit_usd": "60"},
        content_type="application/json",
        **auth(cast.org_key),
    )
    assert changed.status_code == 200 and changed.json()["id"] == data["id"]
    assert Budget.objects.get().limit_usd == 60
    member = make_admin_user(cast.org)
    client.force_login(member)
    by_member = client.post(
        "/api/budgets",
        {"scope": "organization", "monthly_limit_usd": "100"},
        content_type="application/json",
    )
    assert by_member.status_code == 201


def test_budget_input_errors(client, cast):
    def post(body):
        return client.post(
            "/api/budgets", body, content_type="application/json", **auth(cast.org_key)
        )

    assert post({"scope": "galaxy", "monthly_limit_usd": "1"}).status_code == 400
    assert post({"scope": "team", "monthly_limit_usd": "1"}).json()["code"] == "invalid"
    missing = post({"scope": "agent", "agent": "agent-bob", "monthly_limit_usd": "1"})
    assert missing.status_code == 404 and missing.json()["code"] == "agent_not_found"
    other_task = Task.objects.create(organization=cast.other, title="theirs")
    task = post({"scope": "task", "task": other_task.pk, "limit_usd": "1"})
    assert task.status_code == 404 and task.json()["code"] == "task_not_found"
    assert post({"scope": "organization", "monthly_limit_usd": "-1"}).status_code == 400
    assert post({"scope": "organization"}).status_code == 400
    assert post({"scope": "organization", "limit_usd": "1"}).status_code == 400
    assert Budget.objects.count() == 0


def test_budgets_show_spent_reserved_remaining_and_state(client, cast):
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="0.01")
    budget_set(caller=caller, scope="agent", agent="agent-sarah", limit_usd="1")
    budget_set(
        caller=caller_for_member(make_admin_user(cast.other), cast.other),
        scope="organization",
        limit_usd="7",
    )
    for _ in range(3):
        spend(cast.alex)  # $0.009 of $0.01
    hold(cast.alex, prompt_bound=100, max_tokens=100)  # $0.0003 held
    rows = client.get("/api/budgets", **auth(cast.org_key)).json()
    org_row = next(r for r in rows if r["scope"] == "organization")
    assert org_row["spent_usd"] == "0.009000000"
    assert org_row["reserved_usd"] == "0.000300000"
    assert org_row["remaining_usd"] == "0.000700000"
    assert org_row["state"] == "warning"
    assert {r["scope"] for r in rows} == {"organization", "agent"}
    alex_sees = client.get("/api/budgets", **auth(cast.alex_key)).json()
    assert [r["scope"] for r in alex_sees] == ["organization"]  # not Sarah's
    alerts = client.get("/api/budgets/alerts", **auth(cast.org_key))
    assert [a["kind"] for a in alerts.json()["results"]] == ["warning"]
    assert client.get("/api/budgets/alerts", **auth(cast.alex_key)).status_code == 403


def test_report_usage_tool(client, cast):
    from organization.caller import caller_for_agent
    from organization.registry import call_tool

    row = call_tool(
        caller_for_agent(cast.alex),
        "report_usage",
        {
            "provider": "openai",
            "model": "fake-model",
            "prompt_tokens": 1000,
            "completion_tokens": 0,
        },
    )
    assert row["self_reported"] is True and Decimal(row["cost_usd"]) == Decimal("0.001")


def test_budget_changes_are_in_the_audit_with_who_and_before_after(client, cast):
    body = {"scope": "organization", "monthly_limit_usd": "10"}
    client.post("/api/budgets", body, content_type="application/json", **auth(cast.org_key))
    client.post(
        "/api/budgets",
        {**body, "monthly_limit_usd": "25"},
        content_type="application/json",
        **auth(cast.org_key),
    )
    spend(cast.alex)  # the counters move: not an audit entry
    entries = [
        e
        for e in client.get("/api/audit", **auth(cast.org_key)).json()["results"]
        if e["model"] == "budget"
    ]
    assert [e["action"] for e in entries] == ["created", "changed"]
    assert entries[0]["who"]["kind"] == "organization_key"
    (change,) = [c for c in entries[1]["changes"] if c["field"] == "limit_usd"]
    assert Decimal(change["before"]) == 10 and Decimal(change["after"]) == 25
