"""A remote A2A agent's card is fetched and checked when the admin saves the agent, or an
organization file imports it (issue 38 §2): a card is stored with its skills as expertise; a URL
that is no card, or a private address while WEBHOOK_ALLOW_PRIVATE_NETWORKS is off, is refused
with the reason and nothing is saved."""

import asyncio
import json
import socket
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError
from django.db import connections
from django.urls import reverse
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

from organization.models import Agent, AgentRuntime
from organization.remote_a2a import CardRefused, fetch_card
from portability.sections.people import MAX_CARDS_PER_IMPORT
from tests.factories import make_admin_user, make_agent, make_org
from tests.organization.mcp.live import LiveServer
from tests.organization.test_admin import change_url
from tests.organization.test_agent_handle import ADD, add_form
from tests.portability.conftest import export, import_file
from tests.runtime.a2a_remote import CARD_PATH, RemoteAgent, card_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(client, db):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    return client


def add_remote(root_client, org, url: str, **fields):
    data = add_form(
        root_client,
        org,
        handle="agent-gopher",
        runtime=AgentRuntime.A2A,
        a2a_card_url=url,
        **fields,
    )
    return root_client.post(ADD, data)


def errors_of(response) -> dict:
    assert response.status_code == 200
    return response.context["adminform"].form.errors


def test_a_card_is_fetched_at_save_and_its_skills_become_the_expertise(root_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    org = make_org("acme")
    with RemoteAgent() as remote:
        response = add_remote(
            root_client, org, remote.card_url, expertise="Python", a2a_token_env="A2A_TOKEN_GOPHER"
        )
    assert response.status_code == 302, response.context["adminform"].form.errors
    agent = Agent.objects.get(organization=org, handle="agent-gopher")
    assert agent.runtime == AgentRuntime.A2A
    assert agent.expertise == ["Go", "gRPC"]
    assert agent.a2a_card["name"] == "Gopher"
    assert agent.a2a_card["supportedInterfaces"][0] == {
        "url": f"{remote.url}/rpc",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert agent.a2a_card_fetched_at is not None
    assert agent.a2a_token_env == "A2A_TOKEN_GOPHER"
    # The change page shows the settings (the card itself is not a form field).
    page = root_client.get(change_url(agent)).content.decode()
    assert remote.card_url in page and "A2A_TOKEN_GOPHER" in page
    assert (
        f"<strong>Gopher</strong> 1.0.0<br>JSONRPC {remote.url}/rpc, HTTP+JSON {remote.url}/rest"
        in page
    )


def test_a_url_that_is_not_a_card_is_refused(root_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    org = make_org("acme")
    with RemoteAgent() as remote:
        not_json = add_remote(root_client, org, f"{remote.url}/health")
        missing = add_remote(root_client, org, f"{remote.url}/nothing-here")
    assert errors_of(not_json) == {
        "a2a_card_url": [f"{remote.url}/health is not an A2A agent card: it has no name"]
    }
    # The SDK's routes redirect an unknown path: a redirect is not followed, and no card.
    assert errors_of(missing) == {
        "a2a_card_url": [f"{remote.url}/nothing-here answered HTTP 307, not a card"]
    }
    assert not org.agents.exists()


def test_a_private_address_is_refused_unless_the_setting_allows_it(root_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    org = make_org("acme")
    with RemoteAgent() as remote:
        refused = add_remote(root_client, org, remote.card_url)
        assert errors_of(refused) == {
            "a2a_card_url": [
                "A2A card URLs must be http(s) and point to a public address "
                "(127.0.0.1 is not a public address)."
            ]
        }
        assert not org.agents.exists()
        settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
        allowed = add_remote(root_client, org, remote.card_url)
    assert allowed.status_code == 302
    assert org.agents.get().expertise == ["Go", "gRPC"]


def test_a_remote_agent_needs_a_card_url_and_its_token_variable_is_a_name(root_client):
    org = make_org("acme")
    no_url = add_remote(root_client, org, "")
    assert errors_of(no_url) == {
        "a2a_card_url": ["A remote A2A agent needs the URL of its agent card."]
    }
    agent = make_agent(org, "agent-other")
    agent.runtime, agent.a2a_card_url = AgentRuntime.A2A, "https://agents.example.com/card.json"
    # Only a variable named for it: no other secret of the service can be sent as a token.
    for name in ["Bearer abc.def", "SECRET_KEY", "a2a_token_x"]:
        agent.a2a_token_env = name
        with pytest.raises(ValidationError) as refused:
            agent.full_clean()
        assert refused.value.message_dict == {
            "a2a_token_env": [
                "The name of an environment variable starting with A2A_TOKEN_, in capitals, "
                "digits and underscores (e.g. A2A_TOKEN_BILLING)."
            ]
        }


def test_an_organization_file_carries_it_and_its_import_checks_the_card(settings, tmp_path):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    org = make_org("acme")
    with RemoteAgent() as remote:
        make_agent(
            org,
            "agent-gopher",
            runtime=AgentRuntime.A2A,
            a2a_card_url=remote.card_url,
            a2a_token_env="A2A_TOKEN_GOPHER",
        )
        document = export("acme")
        (item,) = document["agents"]
        assert (item["runtime"], item["a2a_card_url"], item["a2a_token_env"]) == (
            "a2a",
            remote.card_url,
            "A2A_TOKEN_GOPHER",
        )
        assert "a2a_card" not in item
        import_file(tmp_path, document, "--as", "copy")
        copied = Agent.objects.get(organization__slug="copy", handle="agent-gopher")
        assert (copied.expertise, copied.a2a_card["name"]) == (["Go", "gRPC"], "Gopher")

        item["a2a_card_url"] = f"{remote.url}/health"
        with pytest.raises(CommandError) as refused:
            import_file(tmp_path, document, "--as", "other")
    assert str(refused.value) == (
        f"agents[0] (agent-gopher): a2a_card_url: {remote.url}/health is not an A2A agent "
        "card: it has no name"
    )
    assert not Agent.objects.filter(organization__slug="other").exists()


@pytest.mark.django_db(transaction=True)
def test_an_import_fetches_the_cards_before_its_transaction(settings, tmp_path):
    """No transaction is open (nor the organization's row locked) while a remote answers."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    main = connections["default"]  # this thread's connection, looked at from the remote's
    in_transaction = []

    async def card(request):
        in_transaction.append(main.in_atomic_block)
        return JSONResponse(MessageToDict(card_for(str(request.base_url).rstrip("/"))))

    org = make_org("acme")
    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, card)]), lifespan="off") as server:
        make_agent(
            org, "agent-gopher", runtime=AgentRuntime.A2A, a2a_card_url=server.url + CARD_PATH
        )
        import_file(tmp_path, export("acme"), "--as", "copy")
    assert in_transaction == [False]
    copied = Agent.objects.get(organization__slug="copy", handle="agent-gopher")
    assert (copied.expertise, copied.a2a_card["name"]) == (["Go", "gRPC"], "Gopher")


def test_a_card_that_trickles_in_is_given_up_after_the_timeout(settings):
    """The timeout bounds the whole fetch, not each read: a server sending its card a few bytes
    at a time, each within the timeout, is not waited for."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    settings.A2A_REMOTE_TIMEOUT_SECONDS = 1

    async def trickles(request):
        body = json.dumps(MessageToDict(card_for(str(request.base_url).rstrip("/"))))

        async def chunks():
            yield " " * 10
            for _ in range(12):  # 3 s in all, each chunk well within the 1 s timeout
                await asyncio.sleep(0.25)
                yield " "
            yield body

        return StreamingResponse(chunks(), media_type="application/json")

    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, trickles)]), lifespan="off") as server:
        with pytest.raises(CardRefused) as refused:
            fetch_card(server.url + CARD_PATH)
    assert str(refused.value) == (
        f"{server.url}{CARD_PATH} did not answer: ReadTimeout: the card took longer than 1 s "
        "(A2A_REMOTE_TIMEOUT_SECONDS)"
    )


def test_a_card_whose_headers_trickle_in_is_given_up_after_the_timeout(settings):
    """The same for an answer whose status line and headers come a byte at a time."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    settings.A2A_REMOTE_TIMEOUT_SECONDS = 1
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            # 0.25 s apart, for 6 s, then the connection closed with the headers unfinished.
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 7:
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up
                time.sleep(0.25)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}{CARD_PATH}"
    try:
        with pytest.raises(CardRefused) as refused:
            fetch_card(url)
    finally:
        server.join(timeout=10)
        listener.close()
    assert str(refused.value) == (
        f"{url} did not answer: ReadTimeout: the card took longer than 1 s "
        "(A2A_REMOTE_TIMEOUT_SECONDS)"
    )


def test_a_card_over_its_size_limit_is_not_read(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True

    async def large(request):
        card = MessageToDict(card_for(str(request.base_url).rstrip("/")))
        return JSONResponse(card | {"description": "x" * 300_000})

    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, large)]), lifespan="off") as server:
        with pytest.raises(CardRefused) as refused:
            fetch_card(server.url + CARD_PATH)
    assert str(refused.value) == (
        f"{server.url}{CARD_PATH} did not answer: ResponseTooLarge: the answer is longer than "
        "262144 bytes"
    )


def test_only_a_superuser_names_the_token_variable(client, settings, tmp_path):
    """The A2A_TOKEN_… variables are the install's, shared by its organizations: an
    organization's staff naming one would have another organization's token sent to a server
    of their choosing. Their form shows it read-only; their import may not set or change it."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    org = make_org("acme")
    client.force_login(make_admin_user(org, username="bob"))
    with RemoteAgent() as remote:
        answer = add_remote(client, org, remote.card_url, a2a_token_env="A2A_TOKEN_OTHERS")
        assert answer.status_code == 302
        gopher = Agent.objects.get(organization=org, handle="agent-gopher")
        assert gopher.a2a_token_env == ""
        page = client.get(change_url(gopher))
        assert "a2a_token_env" in page.context["adminform"].readonly_fields

        document = export("acme")
        document["agents"][0]["a2a_token_env"] = "A2A_TOKEN_OTHERS"
        answer = client.post(
            reverse("admin:organization_organization_import"),
            {"document": json.dumps(document), "confirm": "1"},
        )
    assert (
        "Nothing was imported: agents[0] (agent-gopher): a2a_token_env: Only a superuser names "
        "the token&#x27;s environment variable"
    ) in answer.content.decode()
    gopher.refresh_from_db()
    assert gopher.a2a_token_env == ""


def test_an_import_fetches_a_bounded_number_of_cards(settings, tmp_path):
    """Each card may take A2A_REMOTE_TIMEOUT_SECONDS: a file making the import fetch more than
    MAX_CARDS_PER_IMPORT of them is refused before any is fetched."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    fetched = []

    async def card(request):
        fetched.append(request.url.query)
        return JSONResponse(MessageToDict(card_for(str(request.base_url).rstrip("/"))))

    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, card)]), lifespan="off") as server:
        agents = [
            {
                "id": f"agent-r{n}",
                "name": f"Remote {n}",
                "runtime": "a2a",
                "a2a_card_url": f"{server.url}{CARD_PATH}?n={n}",
            }
            for n in range(MAX_CARDS_PER_IMPORT + 1)
        ]
        document = {"format": "agent-org", "version": 1, "organization": {"slug": "acme"}}
        with pytest.raises(CommandError) as refused:
            import_file(tmp_path, document | {"agents": agents})
        assert fetched == []
        assert str(refused.value) == (
            f"agents: the file would have {MAX_CARDS_PER_IMPORT + 1} remote A2A agents' cards "
            f"fetched; an import fetches at most {MAX_CARDS_PER_IMPORT} (import the file in parts)."
        )
        import_file(tmp_path, document | {"agents": agents[:MAX_CARDS_PER_IMPORT]})
    assert len(fetched) == MAX_CARDS_PER_IMPORT
    assert Agent.objects.filter(organization__slug="acme").count() == MAX_CARDS_PER_IMPORT


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[" * 100_000, "is not an A2A agent card: maximum recursion depth exceeded"),
        ("NUL", "is not an A2A agent card we can store: card.name: contains a NUL character"),
    ],
)
def test_a_card_we_cannot_read_or_store_is_refused(settings, body, reason):
    """Deeply nested JSON, or a NUL character (PostgreSQL's text and jsonb hold none): refused
    with the reason, never an error of the page saving it."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True

    async def card(request):
        if body == "NUL":
            data = MessageToDict(card_for(str(request.base_url).rstrip("/"), name="Go\x00pher"))
            return JSONResponse(data)
        return PlainTextResponse(body, media_type="application/json")

    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, card)]), lifespan="off") as server:
        with pytest.raises(CardRefused) as refused:
            fetch_card(server.url + CARD_PATH)
    assert str(refused.value).startswith(f"{server.url}{CARD_PATH} {reason}")


def resolving(monkeypatch, answers: dict[str, list[str]]) -> list[str]:
    """Names resolved as `answers` says (each lookup takes the next address list, the last
    one staying); the lookups made, in order."""
    real, lookups = socket.getaddrinfo, []

    def resolver(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        ips = answers[host][min(len(lookups), len(answers[host])) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips.split()]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return lookups


def test_a_name_resolving_to_a_private_address_is_refused(monkeypatch, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    resolving(monkeypatch, {"mixed.test": ["93.184.215.14 127.0.0.1"]})
    with pytest.raises(CardRefused) as refused:
        fetch_card(f"http://mixed.test{CARD_PATH}")
    assert str(refused.value) == (
        f"http://mixed.test{CARD_PATH} is not allowed: mixed.test resolves to 127.0.0.1"
    )


def test_the_card_is_fetched_from_the_address_checked_keeping_the_host(monkeypatch, settings):
    """DNS rebinding: a second lookup would answer elsewhere; the checked address is used."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the server is on 127.0.0.1
    lookups = resolving(monkeypatch, {"rebind.test": ["127.0.0.1", "10.255.255.1"]})
    hosts = []

    async def card(request):
        hosts.append(request.headers["host"])
        return JSONResponse(MessageToDict(card_for(str(request.base_url).rstrip("/"))))

    with LiveServer(app=Starlette(routes=[Route(CARD_PATH, card)]), lifespan="off") as server:
        fetched = fetch_card(f"http://rebind.test:{server.port}{CARD_PATH}")
    assert fetched["name"] == "Gopher"
    assert (lookups, hosts) == (["rebind.test"], [f"rebind.test:{server.port}"])
