"""The estimate "counts each planned call at its worst case": what the run then holds for its
calls (each call's reservation, its worst case) can never be more than the estimate."""

import json
from decimal import Decimal

import pytest
from django.db.models import Sum

from collaboration import runner
from costs.budgets import budget_set
from costs.models import UsageRecord
from organization.caller import caller_for_member
from tests.costs.conftest import FAKE_PRICE, auth
from tests.factories import make_admin_user
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)

PRICEY = {"input": Decimal(100), "output": Decimal(1000)}
# Alex coordinates: it plans, and (with no coordinator_config) synthesizes.
HIERARCHICAL = {
    "task": "Design the cache",
    "mode": "hierarchical",
    "agents": [
        {"agent_id": "agent-alex", "focus": "lead"},
        {"name": "a", "role": "a", "focus": "the a view"},
    ],
}


def estimate_then_run(client, cast, body):
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="organization", limit_usd="100000")  # rows hold reservations
    estimate = client.post(
        "/api/collaborations/estimate",
        json.dumps(body),
        content_type="application/json",
        **auth(cast.org_key),
    )
    assert estimate.status_code == 200, estimate.content
    started = client.post(
        "/api/collaborations",
        json.dumps(body),
        content_type="application/json",
        **auth(cast.org_key),
    )
    assert started.status_code == 202, started.content
    session_id = started.json()["id"]
    runner.run_session(session_id)
    held = UsageRecord.objects.filter(session_id=session_id).aggregate(s=Sum("reserved_usd"))["s"]
    by_purpose = list(
        UsageRecord.objects.filter(session_id=session_id).values_list(
            "purpose", "model", "reserved_usd"
        )
    )
    return Decimal(estimate.json()["estimated_cost_usd"]), held, by_purpose


def test_the_estimate_prices_a_hierarchical_plan_with_the_coordinator_model(
    client, cast, fake_llm, settings
):
    """The run's plan call uses COLLAB_COORDINATOR_MODEL (llm_settings(..., coordinator=True)),
    and so does the estimate's price of it (it priced LLM_MODEL)."""
    settings.LLM_PRICES = {"openai/fake-model": FAKE_PRICE, "openai/pricey-model": PRICEY}
    settings.COLLAB_COORDINATOR_MODEL = "pricey-model"
    estimated, held, rows = estimate_then_run(client, cast, HIERARCHICAL)
    assert held <= estimated, (estimated, held, rows)


def test_the_estimate_prices_a_hierarchical_synthesis_with_the_coordinating_agents_model(
    client, cast, fake_llm, settings
):
    """With no coordinator_config, a hierarchical synthesis runs with the coordinating agent's
    settings (runner.agent.synthesis_settings), and the estimate prices it so (it priced the
    defaults)."""
    settings.LLM_PRICES = {"openai/fake-model": FAKE_PRICE, "openai/pricey-model": PRICEY}
    cast.alex.llm_model = "pricey-model"
    cast.alex.save(update_fields=["llm_model"])
    # The plan is tried twice (as the estimate counts it): the first answer is no plan.
    fake_llm.on(purpose="plan", replies=Reply(text="no plan in this answer"))
    estimated, held, rows = estimate_then_run(client, cast, HIERARCHICAL)
    assert held <= estimated, (estimated, held, rows)
