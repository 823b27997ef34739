"""`/metrics` (issue 39 §2): served only with METRICS_TOKEN, to its bearer; the organizations'
series read from the database, refusals counted at every door by the rule's code."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from costs.models import Budget, UsageRecord
from tasks.models import Task, TaskStatus
from tests.tasks.conftest import Cast, create, post

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-scrape"


def scrape(token: str | None = TOKEN):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Client().get("/metrics", **headers)


def samples(response) -> dict[tuple, float]:
    """(name, sorted labels) → value of every sample of the scrape."""
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_not_served_without_a_token_and_only_to_its_bearer(settings):
    settings.METRICS_TOKEN = ""
    assert scrape().status_code == 404
    settings.METRICS_TOKEN = TOKEN
    assert scrape(None).status_code == 401
    assert scrape("wrong").status_code == 401
    response = scrape()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")


def test_the_organizations_series_and_refusals_by_code(settings):
    settings.METRICS_TOKEN = TOKEN
    cast = Cast()
    org = {"organization": "acme"}
    sarah = cast.client(cast.sarah)
    task_id = create(sarah, agent_id="agent-sarah").json()["id"]
    # Refused twice at the REST door and once at the tool door, by code.
    assert (
        post(sarah, f"/api/tasks/{task_id}/delegate", {"agent_id": "agent-sarah"}).status_code
        == 409
    )
    assert (
        post(sarah, f"/api/tasks/{task_id}/delegate", {"agent_id": "agent-sarah"}).status_code
        == 409
    )
    refused = post(
        sarah,
        "/api/agent-engine/call-tool",
        {"toolName": "delegate_task", "params": {"task_id": task_id, "agent_id": "agent-sarah"}},
    )
    assert refused.json()["code"] == "self_delegation", refused.content
    Task.objects.create(
        organization=cast.org,
        title="waits",
        status=TaskStatus.QUEUED,
        queued_for=cast.morgan,
        queued_at=timezone.now() - timedelta(seconds=90),
    )
    UsageRecord.objects.create(
        organization=cast.org, purpose="run", provider="openai", model="gpt-x", cost_usd="0.25"
    )
    Budget.objects.create(organization=cast.org, scope="organization", limit_usd="10", period="")

    found = samples(scrape())

    assert found["agent_org_tasks", tuple(sorted({**org, "status": "assigned"}.items()))] == 1
    assert (
        found["agent_org_refusals_total", (("code", "self_delegation"), ("organization", "acme"))]
        == 3
    )
    assert found["agent_org_queue_oldest_seconds", (("organization", "acme"),)] >= 90
    model = (("model", "gpt-x"), ("organization", "acme"))
    assert found["agent_org_cost_usd_total", model] == 0.25
    calls = (("model", "gpt-x"), ("organization", "acme"), ("provider", "openai"))
    assert found["agent_org_model_calls_total", calls] == 1
    budget = (("organization", "acme"), ("scope", "organization"))
    assert found["agent_org_budget_remaining_usd", budget] == 10


def test_the_dashboard_and_the_alerts_read_only_series_the_service_serves(settings):
    """deploy/grafana/agent-org.json and deploy/prometheus/alerts.yaml name no series /metrics
    does not serve (a renamed series would leave a panel or an alert silently empty)."""
    import json
    import re
    from pathlib import Path

    import yaml

    settings.METRICS_TOKEN = TOKEN
    Cast()
    served = {family.name for family in text_string_to_metric_families(scrape().content.decode())}
    served |= {f"{name}_total" for name in served}
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    dashboard = json.loads((deploy / "grafana" / "agent-org.json").read_text())
    rules = yaml.safe_load((deploy / "prometheus" / "alerts.yaml").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    named = {n for e in exprs for n in re.findall(r"\b(agent_org_[a-z_]+)\b", e)}
    assert named and named <= served, named - served
    assert len(dashboard["panels"]) == 10
