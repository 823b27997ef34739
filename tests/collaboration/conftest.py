"""Fixtures of the collaboration tests: a fake LLM server, a cast of agents, a runner."""

import pytest
from django.conf import settings as django_settings
from django.db import connection

from collaboration import providers, runner
from collaboration.models import CollaborationSession
from organization.caller import Caller
from tests.config import waiting
from tests.factories import make_admin_user, make_agent, make_org
from tests.fake_llm import FakeLLM, Reply, ToolUse

# The runner's agent threads close their database connections as soon as no session runs (not
# 30 s later): the test database must be droppable when the suite ends. tests/conftest.py is to set
# the same for the whole suite (other apps' tests run sessions too); this keeps a run of only
# tests/collaboration right whatever that file does.
django_settings.COLLAB_IDLE_CLOSE_SECONDS = 0.0


@pytest.fixture
def offline(settings, monkeypatch):
    """The offline provider, whatever keys the machine has."""
    settings.LLM_PROVIDER = "offline"
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_llm(settings, monkeypatch):
    """A FakeLLM on 127.0.0.1 that both SDKs point at; openai is the default provider."""
    providers.warm_up()  # the SDK imports take seconds once; not inside a timed session
    with FakeLLM() as fake:
        for key, value in fake.env().items():
            monkeypatch.setenv(key, value)
        settings.LLM_PROVIDER = "openai"
        settings.LLM_MODEL = "fake-model"
        yield fake


@pytest.fixture
def acme(db):
    org = make_org("acme")
    make_agent(
        org,
        "agent-alex",
        name="Alex",
        role="Backend Developer",
        expertise=["PostgreSQL", "API Design"],
    )
    make_agent(org, "agent-sarah", name="Sarah", role="Frontend Developer", expertise=["React"])
    make_agent(org, "agent-sam", name="Sam", role="Infrastructure Lead", is_paused=True)
    return org


def human(org) -> Caller:
    """A human administrator of `org` (as the admin or an org member's session would act)."""
    return Caller(organization=org, user=make_admin_user(org))


def specialists(*names: str, **extra) -> list[dict]:
    return [{"name": n, "role": n.split("-")[0], "focus": f"the {n} view", **extra} for n in names]


def run(session) -> CollaborationSession:
    """Run the session in this process, as the worker would, and return it fresh."""
    runner.run_session(session.pk)
    return CollaborationSession.objects.get(pk=session.pk)


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
    """Poll until predicate() is truthy; fail after `timeout` seconds (never a blind sleep)."""
    return waiting.wait_for(predicate, timeout, "the condition", every=interval)


def calls_then_answers(fake: FakeLLM, agent: str, call: ToolUse, answer: str) -> None:
    """`agent`'s model makes one tool call, then answers `answer` once it has the result."""
    fake.on(agent=agent, replies=[Reply(tool_calls=[call]), Reply(answer)])


def event_names(session) -> list[str]:
    return [e.name.removeprefix("tool:collaborative:") for e in session.events.order_by("id")]


def _renew_pool() -> None:
    connection.close()
    connection.close_pool()  # the next connection makes a new pool: none of the killed ones


@pytest.fixture
def fresh_pool(transactional_db):
    """For tests that kill or cut database connections: the idle pooled connections they break
    must not reach the tests after them."""
    _renew_pool()
    yield
    _renew_pool()
