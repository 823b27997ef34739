"""The SDK providers against the fake server: retries, tokens, settings, keys, selection."""

import json
import logging

import pytest
from django.urls import reverse

from collaboration import providers
from collaboration.models import CollaborationSession, Contribution
from collaboration.services import session_create
from tests.collaboration.conftest import human, run, specialists
from tests.collaboration.starts import started
from tests.conftest import agent_of
from tests.factories import make_admin_user
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def only_a(**config) -> list[dict]:
    """The one agent "a", its config as given."""
    return [{"name": "a", "config": config}]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_429_429_then_200_is_one_contribution_three_attempts_tokens_counted(
    acme, fake_llm, provider
):
    fake_llm.on(
        agent="a",
        replies=[
            Reply(status=429),
            Reply(status=429),
            Reply("third time lucky", prompt_tokens=30, completion_tokens=12),
        ],
    )
    session = started(acme, only_a(provider=provider, model="m-1"), synthesis="merge")
    session = run(session)
    contribution = session.contributions.get()
    assert Contribution.objects.filter(session=session).count() == 1
    assert contribution.status == "completed"
    assert contribution.attempts == 3
    assert [c.status for c in fake_llm.calls_for(agent="a")] == [429, 429, 200]
    assert {c.api for c in fake_llm.calls_for(agent="a")} == {provider}
    assert (contribution.prompt_tokens, contribution.completion_tokens) == (30, 12)
    assert contribution.tokens_used == 42
    assert session.metadata["total_tokens"] == 42
    assert contribution.provider == provider and contribution.model == "m-1"


@pytest.mark.parametrize(
    ("provider", "credential"),
    [("openai", "Bearer fake-openai-key"), ("anthropic", "Bearer fake-anthropic-key")],
)
def test_each_provider_presents_its_key_and_sends_the_request_as_built(
    acme, fake_llm, provider, credential
):
    """OpenAI's request goes through the SDK's `client.post`, not `create`: the key is still
    presented as `create` presents it, and the body arrives as the provider built it."""
    a = only_a(provider=provider, model="m-9", max_tokens=77, temperature=0.3)
    session = started(acme, a, synthesis="merge")
    run(session)
    call = fake_llm.calls_for(agent="a")[0]
    assert call.credential == credential
    assert (call.path.rsplit("/", 1)[-1], call.model, call.max_tokens, call.temperature) == (
        {"openai": "completions", "anthropic": "messages"}[provider],
        "m-9",
        77,
        0.3,
    )


def test_anthropic_gets_system_temperature_and_max_tokens(acme, fake_llm):
    a = only_a(
        provider="anthropic",
        model="claude-x",
        temperature=0.1,
        max_tokens=321,
        system_prompt="You are A.",
    )
    session = started(acme, a, synthesis="merge")
    run(session)
    call = fake_llm.calls_for(agent="a")[0]
    assert call.api == "anthropic"
    assert (call.model, call.temperature, call.max_tokens) == ("claude-x", 0.1, 321)
    assert call.system == "You are A."


def test_an_org_agent_uses_its_stored_llm_settings_and_its_org_prompt(acme, fake_llm):
    alex = agent_of(acme, "agent-alex")
    alex.llm_provider, alex.llm_model, alex.llm_temperature, alex.llm_max_tokens = (
        "anthropic",
        "claude-alex",
        0.4,
        200,
    )
    alex.save()
    session = session_create(
        caller=human(acme),
        payload={
            "task": "Index strategy?",
            "synthesis": "merge",
            "agents": [{"agent_id": "agent-alex", "focus": "query plans"}],
        },
    )
    run(session)
    call = fake_llm.calls_for(agent="agent-alex")[0]
    assert call.api == "anthropic"
    assert (call.model, call.temperature, call.max_tokens) == ("claude-alex", 0.4, 200)
    assert "YOUR ORGANIZATIONAL CONTEXT" in call.system
    assert "You are Alex (Backend Developer)" in call.system
    assert "PostgreSQL, API Design" in call.system
    assert "## Your Focus\nquery plans" in call.prompt


def test_the_default_provider_and_model_come_from_the_environment(acme, fake_llm):
    run(session_create(caller=human(acme), payload={"task": "t", "agents": specialists("a")}))
    assert fake_llm.calls_for(agent="a")[0].api == "openai"
    assert fake_llm.calls_for(agent="a")[0].model == "fake-model"
    assert fake_llm.calls_for(purpose="synthesis")[0].temperature == 0.3


def test_a_persistent_error_fails_that_agent_after_the_sdk_retries(acme, fake_llm):
    fake_llm.on(agent="a", replies=Reply(status=500))
    session = run(
        session_create(
            caller=human(acme),
            payload={"task": "t", "synthesis": "merge", "agents": specialists("a", "b")},
        )
    )
    a = session.contributions.get(agent_key="a")
    assert a.status == "failed"
    assert a.error.startswith("openai: HTTP 500 after 3 attempt(s): ")
    assert a.error.endswith("fake api_error (500)")
    assert len(fake_llm.calls_for(agent="a")) == 3
    assert session.status == "partial"
    assert session.error == f"a: {a.error}"
    failed = session.events.get(name="tool:collaborative:agent:failed")
    assert failed.data["agent"] == "a" and failed.data["status"] == "failed"


def test_api_keys_never_reach_the_database_the_api_or_the_admin(
    acme, fake_llm, monkeypatch, org_client, client
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret-456")
    client = org_client(acme)
    session_id = client.post(
        "/api/collaborations", {"task": "t", "agents": specialists("a")}, format="json"
    ).json()["id"]
    run(CollaborationSession.objects.get(pk=session_id))
    body = json.dumps(client.get(f"/api/collaborations/{session_id}").json())
    rows = json.dumps(list(CollaborationSession.objects.values()), default=str) + json.dumps(
        list(Contribution.objects.values()), default=str
    )
    client.force_login(make_admin_user(acme))
    page = client.get(reverse("admin:collaboration_collaborationsession_change", args=[session_id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert fake_llm.calls_for(agent="a")[0].answered and "Fake answer from a." in html
    for secret in ("sk-very-secret-123", "sk-ant-very-secret-456"):
        assert secret not in body and secret not in rows and secret not in html


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "offline"),
        ({"OPENAI_API_KEY": "k"}, "openai"),
        ({"ANTHROPIC_API_KEY": "k"}, "anthropic"),
        ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "openai"),
        ({"LLM_PROVIDER": "anthropic", "OPENAI_API_KEY": "k"}, "anthropic"),
        ({"LLM_PROVIDER": "offline", "OPENAI_API_KEY": "k"}, "offline"),
    ],
)
def test_the_default_provider_is_chosen_as_the_issue_says(settings, monkeypatch, env, expected):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.LLM_PROVIDER = env.pop("LLM_PROVIDER", "")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert providers.default_provider_name() == expected


def test_llm_model_is_the_default_providers_model_only(settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.LLM_PROVIDER, settings.LLM_MODEL = "openai", "gpt-local"
    assert providers.default_model_for("openai") == "gpt-local"
    assert providers.default_model_for("anthropic") == settings.LLM_DEFAULT_MODELS["anthropic"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_call_logs_no_line_per_http_request(acme, fake_llm, provider, caplog):
    """The SDKs' HTTP client (httpx2) logs every request at INFO: a line per model call in the
    workers' logs. The service's LOGGING keeps it to warnings (LOG_LEVEL=DEBUG shows them)."""
    caplog.set_level(logging.INFO)
    session = started(acme, only_a(provider=provider, model="m-1"), synthesis="merge")
    run(session)
    assert fake_llm.calls_for(agent="a")
    assert [
        r.getMessage() for r in caplog.records if r.name.startswith(("httpx", "httpcore"))
    ] == []
