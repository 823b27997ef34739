"""The admin's forms read as words: the only organization chosen already, labels with their
acronyms, durations typed and shown as durations, no agent its own senior, the webhook secret
masked until revealed."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from costs.models import Budget, UsageRecord
from organization.models import Agent, TeamRule
from tasks.models import (
    DESCRIPTION_MAX_LENGTH,
    Task,
    WebhookDelivery,
)
from tests.factories import make_admin_user, make_agent, make_org
from tests.organization.test_admin import change_url, form_of

pytestmark = pytest.mark.django_db

ADD_FORMS = [
    "organization/agent",
    "organization/apikey",
    "organization/team",
    "tasks/task",
    "costs/budget",
    "organization/expertisegroup",
]


def chosen_organization(html: str) -> str | None:
    select = re.search(r'<select name="organization"[^>]*>(.*?)</select>', html, re.S)
    chosen = re.search(r'<option value="(\d+)" selected>', select.group(1)) if select else None
    return chosen.group(1) if chosen else None


@pytest.mark.parametrize("form", ADD_FORMS)
def test_a_superuser_of_a_one_organization_install_finds_it_chosen(client, form):
    org = make_org("acme")
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    response = client.get(f"/admin/{form}/add/")
    assert response.status_code == 200
    assert chosen_organization(response.content.decode()) == str(org.pk)


@pytest.mark.parametrize("form", ADD_FORMS)
def test_a_staff_member_of_one_organization_among_several_finds_it_chosen(client, form):
    org = make_org("acme")
    make_org("rival")
    client.force_login(make_admin_user(org))
    html = client.get(f"/admin/{form}/add/").content.decode()
    assert chosen_organization(html) == str(org.pk)


def test_a_superuser_of_several_organizations_chooses_one(client):
    make_org("acme"), make_org("rival")
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    html = client.get("/admin/organization/agent/add/").content.decode()
    assert chosen_organization(html) is None


def test_labels_read_as_words(client):
    org = make_org("acme")
    client.force_login(make_admin_user(org))
    agent_form = client.get("/admin/organization/agent/add/").content.decode()
    labels = ("ID", "LLM provider", "LLM model", "LLM temperature", "LLM max tokens", "Webhook URL")
    for label in labels:
        assert f">{label}:</label>" in agent_form, label
    assert "Llm " not in agent_form and "Webhook url" not in agent_form
    budget_form = client.get("/admin/costs/budget/add/").content.decode()
    assert ">Limit (USD):</label>" in budget_form and "Limit usd" not in budget_form


def test_read_only_fields_read_as_words_too(client):
    org = make_org("acme")
    agent = make_agent(org, "agent-alex")
    client.force_login(make_admin_user(org))
    budget = Budget.objects.create(organization=org, scope="organization", limit_usd=5)
    record = UsageRecord.objects.create(
        organization=org,
        agent=agent,
        purpose="run",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=1,
    )
    delivery = WebhookDelivery.objects.create(
        organization=org, agent=agent, url="https://hooks.example/x"
    )
    pages = {
        budget: ("Spent (USD)", "Reserved (USD)"),
        record: ("Cost (USD)",),
        delivery: ("URL",),
    }
    for obj, labels in pages.items():
        html = client.get(change_url(obj)).content.decode()
        for label in labels:
            assert f"<label>{label}:</label>" in html, (obj, label)
        assert not re.search(r"<label>\w+ (usd|url):</label>", html), obj


def test_an_agent_cannot_be_its_own_senior(client):
    org = make_org("acme")
    alex = make_agent(org, "agent-alex")
    client.force_login(make_admin_user(org))
    url = change_url(alex)
    data = form_of(client, url, "agent_form")
    data["senior"] = str(alex.pk)
    response = client.post(url, data)
    assert response.status_code == 200
    assert "An agent cannot be its own senior" in response.content.decode()
    assert Agent.objects.get(pk=alex.pk).senior_id is None


def test_stale_thresholds_read_and_are_typed_as_durations(client, demo):
    client.force_login(make_admin_user(demo))
    url = change_url(demo)
    page = client.get(url).content.decode()
    rule = TeamRule.objects.get(organization=demo)
    shown = re.search(r'name="team_rule-0-stale_after_critical"[^>]*value="([^"]+)"', page)
    assert shown.group(1) == "15 minutes" and rule.stale_after_critical == timedelta(minutes=15)
    data = form_of(client, url, "organization_form")
    data["team_rule-0-stale_after_high"] = "2 hours 30 minutes"
    data["team_rule-0-stale_after_low"] = "2 days"
    assert client.post(url, data).status_code == 302
    rule.refresh_from_db()
    assert rule.stale_after_high == timedelta(hours=2, minutes=30)
    assert rule.stale_after_low == timedelta(days=2)
    data["team_rule-0-stale_after_low"] = "soon"
    response = client.post(url, data)
    assert response.status_code == 200
    assert "Enter a duration such as “15 minutes”" in response.content.decode()


def test_a_collaborations_time_per_agent_reads_as_a_duration(client):
    from tests.console.data import a_vote

    org = make_org("acme")
    session = a_vote(org)
    session.agent_timeout = 300
    session.save(update_fields=["agent_timeout"])
    client.force_login(make_admin_user(org))
    html = client.get(
        reverse("admin:collaboration_collaborationsession_change", args=[session.pk])
    ).content.decode()
    assert re.search(r"Time per agent:</label>\s*<div class=\"readonly\">5 minutes</div>", html)


def test_the_webhook_secret_is_masked_until_revealed(client, demo):
    client.force_login(make_admin_user(demo))
    html = client.get(change_url(demo)).content.decode()
    secret = re.search(r'<details class="secret">(.*?)</details>', html, re.S).group(1)
    summary = re.search(r"<summary>(.*?)</summary>", secret, re.S).group(1)
    assert demo.webhook_secret not in summary and "Reveal" in summary
    assert f'<code id="webhook-secret">{demo.webhook_secret}</code>' in secret
    # Nowhere else on the page in the clear.
    assert html.count(demo.webhook_secret) == 1


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
