"""The v1.0 cards: public, absolute URLs from PUBLIC_BASE_URL, skills, availability; 404s."""

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import a2a_pb2 as pb

from tests.factories import give_tasks, make_agent, make_org
from tests.organization.mcp.live import run

from .conftest import agent_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agents_card_is_public_and_resolves_with_the_sdk(live_url):
    org = make_org("acme")
    ada = make_agent(
        org,
        "ada",
        name="Ada",
        role="Data engineer",
        expertise=["Python", "ETL pipelines"],
        workload_capacity=3,
    )
    give_tasks(ada, 1)
    base = agent_url(live_url, org, "ada")

    async def resolve():
        async with httpx.AsyncClient() as http:
            return await A2ACardResolver(http, base).get_agent_card()

    card = run(resolve())
    assert card.name == "Ada" and "Data engineer" in card.description
    assert [(s.id, s.name) for s in card.skills] == [
        ("python", "Python"),
        ("etl-pipelines", "ETL pipelines"),
    ]
    assert [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", base + "/", "1.0"),
        ("HTTP+JSON", base, "1.0"),
    ]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    (extension,) = card.capabilities.extensions
    assert extension.uri == "urn:agent-org:availability:v1"
    assert dict(extension.params) == {
        "status": "idle",
        "workload": 1.0,
        "capacity": 3.0,
        "queue": 0.0,
    }
    assert isinstance(card, pb.AgentCard)


def test_the_directory_lists_the_organizations_cards(live_url):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada")
    make_agent(org, "bob", name="Bob")
    make_agent(make_org("other"), "eve", name="Eve")
    answer = httpx.get(f"{live_url}/a2a/acme/.well-known/agent-cards.json")
    assert answer.status_code == 200
    assert [card["name"] for card in answer.json()] == ["Ada", "Bob"]


def test_an_unknown_organization_or_agent_is_404(live_url):
    make_agent(make_org("acme"), "ada")
    for path in (
        "/a2a/nope/ada/.well-known/agent-card.json",
        "/a2a/acme/nobody/.well-known/agent-card.json",
        "/a2a/nope/.well-known/agent-cards.json",
    ):
        assert httpx.get(live_url + path).status_code == 404, path


def test_the_0_3_card_endpoints_still_answer(live_url):
    from tests.factories import make_key

    org = make_org("acme")
    make_agent(org, "ada")
    key = make_key(org)
    answer = httpx.get(
        f"{live_url}/api/agents/ada/card", headers={"Authorization": f"Bearer {key}"}
    )
    assert answer.status_code == 200 and answer.json()["protocolVersion"] == "0.3.0"


def test_without_public_base_url_the_urls_are_the_requests_own(live_url, settings):
    settings.PUBLIC_BASE_URL = ""
    make_agent(make_org("acme"), "ada")
    card = httpx.get(f"{live_url}/a2a/acme/ada/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == f"{live_url}/a2a/acme/ada/"
    forged = httpx.get(
        f"{live_url}/a2a/acme/ada/.well-known/agent-card.json", headers={"Host": "evil.example"}
    )
    assert forged.status_code == 400


def test_a_card_is_fresh_for_30_seconds_and_revalidated_by_its_etag(live_url):
    org = make_org("acme")
    ada = make_agent(org, "ada", workload_capacity=3)
    url = f"{live_url}/a2a/acme/ada/.well-known/agent-card.json"
    first = httpx.get(url)
    assert first.headers["cache-control"] == "public, max-age=30"
    etag = first.headers["etag"]
    same = httpx.get(url, headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == etag
    give_tasks(ada, 1)  # its availability changed: another card
    changed = httpx.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert changed.json()["capabilities"]["extensions"][0]["params"]["workload"] == 1
    directory = httpx.get(f"{live_url}/a2a/acme/.well-known/agent-cards.json")
    assert directory.headers["cache-control"] == "public, max-age=30" and directory.headers["etag"]
