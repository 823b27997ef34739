"""Who hears of a decision (issue 37 §3): the requester's webhook, the organization's webhook at
every transition, and a question's expiry."""

from datetime import timedelta

import pytest
from django.utils import timezone

from organization.models import Agent, Organization
from tasks import services
from tasks.models import HumanDecision, InboxItem, WebhookDelivery
from tests.tasks.conftest import post
from tests.tasks.test_approval_gate import gated, held_by_sarah, policy

pytestmark = pytest.mark.django_db

HOOK = "http://127.0.0.1:9/hook"


def test_the_requesting_agents_webhook_gets_the_decision(cast):
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    Agent.objects.filter(pk=cast.sarah.pk).update(webhook_url=HOOK)
    post(cast.human, f"/api/decisions/{decision['id']}/reject", {"comment": "No"})
    delivery = WebhookDelivery.objects.get(agent=cast.sarah)
    assert delivery.payload["event"] == "task.decision"
    assert delivery.payload["task"]["id"] == decision["task"]
    assert "rejected" in delivery.payload["message"]


def test_every_transition_reaches_the_organizations_webhook(cast):
    Organization.objects.filter(pk=cast.org.pk).update(webhook_url=HOOK)
    policy(cast)
    decision = gated(cast, held_by_sarah(cast))
    post(cast.human, f"/api/decisions/{decision['id']}/approve")
    events = list(
        WebhookDelivery.objects.filter(agent=None).order_by("pk").values_list("payload", flat=True)
    )
    assert [e["event"] for e in events] == ["decision.pending", "decision.approved"]
    assert events[1]["decision"]["outcome"]["result"] == "executed"
    assert events[1]["organization"] == "acme"


def test_an_unanswered_question_expires_and_its_agent_is_told(cast, settings):
    task_id = held_by_sarah(cast)
    made = post(
        cast.client(cast.sarah), "/api/decisions", {"task": task_id, "question": "Region?"}
    ).json()
    expires = HumanDecision.objects.get(pk=made["id"]).expires_at
    assert expires > timezone.now() + timedelta(days=6)
    assert services.decisions_sweep(expires + timedelta(seconds=1))["expired"] == 1
    stored = HumanDecision.objects.get(pk=made["id"])
    assert (stored.status, stored.outcome["result"]) == ("expired", "skipped")
    assert "Expired" in InboxItem.objects.get(agent=cast.sarah, kind="decision").message
