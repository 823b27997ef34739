"""Fixtures of the cost tests: a priced fake model, an organization with a team, and keys."""

from decimal import Decimal

import pytest

from costs.metering import Meter, reserve, settle
from tests.collaboration.conftest import fake_llm, offline  # noqa: F401  (fixtures)
from tests.factories import make_agent, make_key, make_org, make_team

# The fake model's price (USD per 1M tokens): $1 in, $2 out, so 1,000 + 1,000 tokens = $0.003.
FAKE_PRICE = {"input": Decimal(1), "output": Decimal(2)}


@pytest.fixture(autouse=True)
def priced(settings):
    settings.LLM_PRICES = {"openai/fake-model": FAKE_PRICE}


class Org:
    def __init__(self):
        self.org = make_org("acme")
        self.dev = make_team(self.org, "Development")
        self.alex = make_agent(self.org, "agent-alex", name="Alex", team=self.dev)
        self.sarah = make_agent(self.org, "agent-sarah", name="Sarah", team=self.dev)
        self.morgan = make_agent(self.org, "agent-morgan", name="Morgan")
        self.org_key = make_key(self.org)
        self.alex_key = make_key(self.org, self.alex)
        self.sarah_key = make_key(self.org, self.sarah)
        self.other = make_org("other")
        self.bob = make_agent(self.other, "agent-bob", name="Bob")
        self.bob_key = make_key(self.other, self.bob)
        self.other_key = make_key(self.other)


@pytest.fixture
def cast(db):
    return Org()


def auth(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def admin_delete(client, changelist: str, pk: int, how: str = "page"):
    """Delete one row in the admin: on its delete page, or by the changelist's bulk action."""
    if how == "page":
        return client.post(f"{changelist}{pk}/delete/", {"post": "yes"})
    action = {"action": "delete_selected", "_selected_action": [pk], "post": "yes"}
    return client.post(changelist, action)


def post(client, path: str, body: dict, key: str):
    """POST `body` as JSON to `path` with `key`'s bearer token."""
    return client.post(path, body, content_type="application/json", **auth(key))


# A self-reported call of a model no price list knows: its cost is what the reporter says.
UNPRICED = {
    "provider": "acme",
    "model": "no-such-model",
    "prompt_tokens": 1,
    "completion_tokens": 1,
}


def hold(agent, prompt_bound=1000, max_tokens=1000, model="fake-model", **meter):
    """Reserve one call of `agent`'s run (OpenAI's `model`): its ticket, holding its worst case."""
    return reserve(
        Meter.for_agent(agent, "run", **meter),
        "openai",
        model,
        prompt_bound=prompt_bound,
        max_tokens=max_tokens,
    )


def spend(agent, prompt=1000, completion=1000, model="fake-model", **meter):
    """One call of `agent`'s run, reserved and settled for all the tokens it could use."""
    ticket = hold(agent, prompt, completion, model, **meter)
    settle(ticket, prompt_tokens=prompt, completion_tokens=completion)
