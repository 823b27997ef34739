"""Fixtures of the cost tests: a priced fake model, an organization with a team, and keys."""

from decimal import Decimal

import pytest

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
