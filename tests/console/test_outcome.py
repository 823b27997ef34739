"""A collaboration opens on its outcome in words (console/outcome.py): verdicts, cards, tokens
and costs, every agent's word escaped."""

from django.urls import reverse

from tests.console.data import SCRIPT, a_vote
from tests.factories import make_org


def test_a_collaboration_opens_on_its_outcome_in_words_with_no_save_button(root_client, db):
    session = a_vote(make_org("acme"))
    response = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert "2 yes, 1 no — 67 % agreement" in html
    assert "The dissent:</strong> agent-c (no): The migration is not reversible." in html
    assert html.count('<article class="agent-card') == 3
    assert "confidence 80%" in html and "102 tokens" in html
    assert 'name="_save"' not in html and 'name="_continue"' not in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "consensus" not in response.context["adminform"].form.fields


def test_an_outcome_card_says_its_status_in_words(root_client, db):
    """Choices read as words on every console page (docs/admin.md): "Timed out", never the
    API's `timed_out`."""
    session = a_vote(make_org("acme"))
    session.contributions.filter(agent_key="agent-c").update(status="timed_out", verdict="")
    html = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    facts = [part.split("</div>")[0] for part in html.split('<div class="facts">')[1:]]
    assert len(facts) == 3
    assert "Timed out" in facts[2] and "timed_out" not in facts[2], facts[2]
    assert "Completed" in facts[0], facts[0]


def test_an_outcome_counts_the_synthesis_tokens_and_keeps_an_agents_cost_its_own(root_client, db):
    """The page's tokens are the session's (the API's metadata.total_tokens: the agents' and the
    coordinator's), and a specialist named "coordinator" is not charged with the synthesis."""
    from decimal import Decimal

    from costs.models import UsageRecord

    org = make_org("acme")
    session = a_vote(org, metadata={"total_tokens": 803, "synthesis_tokens": 500})
    session.contributions.filter(agent_key="agent-a").update(agent_key="coordinator")
    UsageRecord.objects.bulk_create(
        UsageRecord(
            organization=org,
            session=session,
            label=label,
            purpose=purpose,
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal(cost),
            price_source="genai-prices",
        )
        for label, purpose, cost in (
            ("coordinator", "collaboration", "0.25"),
            ("agent-b", "collaboration", "0.5"),
            ("coordinator", "synthesis", "2"),
        )
    )
    response = root_client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    )
    html = response.content.decode()
    assert "803 tokens" in html
    assert "(the coordinator $2.00)" in html
    costs = [part.split("</span>")[0] for part in html.split('<span class="card-cost">')[1:]]
    assert costs == ["$0.2500", "$0.5000"]
