"""Collaborations through the ledger: a row per call with its purpose, the session's cost in its
metadata, max_cost_usd refused up front (409 budget_exhausted), the estimate endpoint, and
concurrent sessions on a small budget that never overspend (PostgreSQL row locks)."""

import json
from decimal import Decimal

import pytest

from collaboration import runner
from collaboration.models import CollaborationSession
from collaboration.services import session_create
from costs.budgets import budget_set
from costs.models import Budget, UsageRecord
from organization.caller import caller_for_member
from tests.concurrency import run_at_once
from tests.factories import make_admin_user

from .conftest import auth

pytestmark = pytest.mark.django_db(transaction=True)


def specialists(*names):
    return [{"name": n, "role": n, "focus": f"the {n} view"} for n in names]


def start(client, key, **body):
    body = {"task": "Design the cache", "agents": specialists("a", "b"), **body}
    return client.post(
        "/api/collaborations", json.dumps(body), content_type="application/json", **auth(key)
    )


def test_each_call_is_in_the_ledger_with_its_purpose_and_the_session_shows_its_cost(
    client, cast, fake_llm
):
    response = start(
        client,
        cast.org_key,
        mode="hierarchical",
        agents=[
            {"agent_id": "agent-alex", "focus": "lead"},
            *specialists("a", "b"),
        ],
    )
    assert response.status_code == 202, response.content
    session_id = response.json()["id"]
    runner.run_session(session_id)
    rows = UsageRecord.objects.filter(session_id=session_id)
    purposes = sorted(rows.values_list("purpose", flat=True))
    assert purposes.count("plan") >= 1
    assert purposes.count("collaboration") == 2
    assert purposes.count("synthesis") == 1
    plan = rows.filter(purpose="plan").first()
    assert plan.agent == cast.alex
    total = sum(r.cost_usd for r in rows)
    assert total > 0
    detail = client.get(f"/api/collaborations/{session_id}", **auth(cast.org_key)).json()
    assert Decimal(detail["metadata"]["cost_usd"]) == total
    # The ledger's nine decimals on every database (SQLite read its float sum to 15 digits).
    assert detail["metadata"]["cost_usd"] == f"{total:.9f}"
    # Each call says who made it; the admin's page shows each agent's cost on its card.
    assert set(rows.values_list("label", flat=True)) == {"agent-alex", "a", "b", "coordinator"}
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("root", "r@x.io", "pw"))
    page = client.get(f"/admin/collaboration/collaborationsession/{session_id}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('class="card-cost"') == 3 and 'id="session-cost"' in html
    specialists_tokens = sum(
        c["prompt_tokens"] for c in detail["contributions"] if c["agent"] != "agent-alex"
    )
    assert specialists_tokens == sum(r.prompt_tokens for r in rows.filter(purpose="collaboration"))


def test_the_offline_provider_records_calls_at_zero(client, cast, offline):
    session_id = start(client, cast.org_key).json()["id"]
    runner.run_session(session_id)
    rows = UsageRecord.objects.filter(session_id=session_id)
    assert rows.count() == 3  # two specialists and the synthesis
    assert {(r.cost_usd, r.prompt_tokens, r.completion_tokens) for r in rows} == {(0, 0, 0)}


def test_max_cost_usd_that_cannot_fit_is_refused_up_front(client, cast, fake_llm):
    response = start(client, cast.org_key, max_cost_usd="0.000001")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "budget_exhausted"
    assert "max_cost_usd" in body["error"] and "$" in body["error"]
    assert CollaborationSession.objects.count() == 0
    ok = start(client, cast.org_key, max_cost_usd="5")
    assert ok.status_code == 202
    budget = Budget.objects.get(scope="collaboration")
    assert str(budget.session_id) == ok.json()["id"] and budget.limit_usd == 5


def test_a_monthly_budget_that_cannot_fit_refuses_the_start(client, cast, fake_llm):
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="0.0001")
    response = start(client, cast.org_key)
    assert response.status_code == 409 and response.json()["code"] == "budget_exhausted"
    assert "organization budget" in response.json()["error"]


def test_estimate_answers_without_starting(client, cast, fake_llm):
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=caller, scope="organization", limit_usd="100")
    body = {"task": "Design the cache", "agents": specialists("a", "b"), "max_cost_usd": "1"}
    response = client.post(
        "/api/collaborations/estimate",
        json.dumps(body),
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert response.status_code == 200, response.content
    data = response.json()
    assert Decimal(data["estimated_cost_usd"]) > 0 and data["estimated_tokens"] > 0
    scopes = [(b["scope"], b["fits"]) for b in data["budgets"]]
    assert scopes == [("organization", True), ("collaboration", True)]
    assert CollaborationSession.objects.count() == 0
    invalid = client.post(
        "/api/collaborations/estimate",
        json.dumps({"task": ""}),
        content_type="application/json",
        **auth(cast.alex_key),
    )
    assert invalid.status_code == 400


@pytest.mark.postgres
def test_concurrent_sessions_never_overspend_a_small_budget(cast, fake_llm, settings):
    """Six sessions of three specialists at once against a budget that fits a few calls: some
    calls are refused, and what was spent never exceeds the limit."""
    settings.LLM_PRICES = {"openai/fake-model": {"input": Decimal(100), "output": Decimal(200)}}
    caller = caller_for_member(make_admin_user(cast.org), cast.org)
    limit = Decimal("1.5")
    budget_set(caller=caller, scope="organization", limit_usd=limit)
    payload = {
        "task": "Design the cache",
        "agents": specialists("a", "b", "c"),
        "max_total_tokens": 100_000,
    }
    # The estimate would refuse them up front: create them as the budget allows, then shrink it.
    budget_set(caller=caller, scope="organization", limit_usd="1000")
    sessions = [session_create(caller=caller, payload=payload) for _ in range(6)]
    budget_set(caller=caller, scope="organization", limit_usd=limit)
    # Each call holds its worst case while the model answers: at zero latency a loaded machine
    # could run the sessions one after another, every call fitting, and the race never happen.
    fake_llm.latency = 0.3
    run_at_once([lambda s=s: runner.run_session(s.pk) for s in sessions])
    budget = Budget.objects.get(scope="organization")
    records = list(UsageRecord.objects.values_list("state", "cost_usd", "reserved_usd"))
    spent = sum(cost or 0 for _, cost, _ in records)
    # Every figure in the messages: a failure of this race must say which one broke.
    seen = f"budget {budget.spent_usd} spent, {budget.reserved_usd} held; records {records}"
    assert budget.reserved_usd == 0, seen
    assert budget.spent_usd == spent, seen
    assert 0 < spent <= limit, seen
    refused = len(records) < 6 * 4
    assert refused, f"the budget should have refused some calls; {seen}"
    # Which calls the budget refused depends on the race: specialists' (the agent fails) or a
    # synthesis (the session says so, or falls back); a refusal is said in words somewhere.
    sessions = [CollaborationSession.objects.get(pk=s.pk) for s in sessions]
    said = [c.error for s in sessions for c in s.contributions.all() if c.status == "failed"]
    said += [s.error for s in sessions]
    said += [str(e.data) for s in sessions for e in s.events.filter(name__contains="fallback")]
    assert any("budget" in text for text in said), said


# 9999999999.9999999999 rounds up to 10**10 at the ledger's 9 places: no column holds it.
@pytest.mark.parametrize("bad", [True, -1, "lots", "NaN", [1], "9999999999.9999999999"])
def test_max_cost_usd_must_be_an_amount(client, cast, offline, bad):
    response = start(client, cast.org_key, max_cost_usd=bad)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid" and "max_cost_usd" in response.json()["error"]
    assert CollaborationSession.objects.count() == 0


def test_the_estimate_counts_only_the_prompts_the_run_will_send(client, cast, fake_llm):
    """An agent's session never sends a colleague's private prompt (may_use_custom_prompt), so
    its estimate must not count it: the figure would tell the starter how long it is."""
    body = json.dumps(
        {
            "task": "Review the plan",
            "agents": [
                {"agent_id": "agent-alex"},
                {"agent_id": "agent-sarah"},
                *specialists("a"),
            ],
        }
    )

    def tokens(key):
        response = client.post(
            "/api/collaborations/estimate", body, content_type="application/json", **auth(key)
        )
        assert response.status_code == 200, response.content
        return response.json()["estimated_tokens"]

    before = {"alex": tokens(cast.alex_key), "org": tokens(cast.org_key)}
    cast.sarah.system_prompt = "x" * 40_000
    cast.sarah.save(update_fields=["system_prompt"])
    assert tokens(cast.alex_key) == before["alex"]  # Sarah's prompt is not Alex's to send
    assert tokens(cast.org_key) > before["org"] + 9_000  # a human's session sends it
    cast.alex.system_prompt = "y" * 40_000
    cast.alex.save(update_fields=["system_prompt"])
    assert tokens(cast.alex_key) > before["alex"] + 9_000  # Alex's own is sent
