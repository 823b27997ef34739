"""Token counts a provider (any OpenAI-compatible server) claims that are not numbers."""

import pytest

from collaboration import providers
from collaboration.providers import LLMRequest
from costs.budgets import budget_set
from costs.metering import Meter
from costs.models import Budget, UsageRecord
from organization.caller import caller_for_member
from tests.factories import make_admin_user
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db


def test_a_provider_claiming_nan_tokens_keeps_its_answer_and_is_not_booked_at_zero(cast, fake_llm):
    """A count that is no number (NaN) is booked at the call's own bound, and the answer the
    provider gave, paid for, is kept (int(nan) raised: the answer was lost, the call booked $0)."""
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="organization", limit_usd="10")
    fake_llm.on(replies=Reply(text="the answer", prompt_tokens=float("nan"), completion_tokens=10))
    request = LLMRequest(system="s", prompt="p", model="fake-model", max_tokens=100)
    reply = providers.complete("openai", request, meter=Meter.for_agent(cast.alex, "run"))
    assert reply.text == "the answer"
    record = UsageRecord.objects.get()
    assert record.error == "" and record.cost_usd > 0
    assert Budget.objects.get().spent_usd > 0
