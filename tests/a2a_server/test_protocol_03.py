"""Protocol 0.3 clients on the v1.0 endpoints: the card's 0.3 fields, the SDK's own 0.3 client
(its compat transports) over both bindings, and a raw 0.3 `message/send`."""

import uuid

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from tasks.models import Task
from tests.factories import make_agent, make_key, make_org
from tests.organization.mcp.live import run

from .conftest import agent_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme(transactional_db):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada")
    return org


def test_the_card_carries_the_03_fields(live_url, acme):
    base = agent_url(live_url, acme, "ada")
    card = httpx.get(f"{base}/.well-known/agent-card.json").json()
    assert card["protocolVersion"] == "0.3"
    assert card["url"] == base + "/" and card["preferredTransport"] == "JSONRPC"
    assert [(i["transport"], i["url"]) for i in card["additionalInterfaces"]] == [
        ("HTTP+JSON", base)
    ]
    # v1.0 clients take the first interface of a binding: the 1.0 one.
    assert [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]] == [
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "1.0"),
        ("HTTP+JSON", "0.3"),
    ]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_sdks_03_client_sends_and_reads_a_task(live_url, acme, binding):
    base = agent_url(live_url, acme, "ada")
    key = make_key(acme)

    async def scenario():
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = pb.AgentCard()
            raw = (await http.get(f"{base}/.well-known/agent-card.json")).json()
            json_format.ParseDict(raw, card, ignore_unknown_fields=True)
            # What a 0.3 server would publish: the 0.3 interfaces only.
            legacy = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(legacy)
            config = ClientConfig(
                streaming=False, httpx_client=http, supported_protocol_bindings=[binding]
            )
            client = ClientFactory(config).create(card)
            assert type(client._transport).__name__.startswith("Compat")
            request = pb.SendMessageRequest(
                message=pb.Message(
                    message_id=str(uuid.uuid4()),
                    role=pb.ROLE_USER,
                    parts=[pb.Part(text="Check the 0.3 door\nfrom an older agent")],
                )
            )
            (answer,) = [one async for one in client.send_message(request)]
            got = await client.get_task(pb.GetTaskRequest(id=answer.task.id))
            return answer.task, got

    sent, got = run(scenario())
    task = Task.objects.get()
    assert sent.id == got.id == str(task.pk)
    assert sent.status.state == got.status.state == pb.TASK_STATE_SUBMITTED
    assert task.title == "Check the 0.3 door" and task.assignee.handle == "ada"


def test_a_raw_03_message_send_answers_in_03_shapes(live_url, acme):
    base = agent_url(live_url, acme, "ada")
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-03",
                "role": "user",
                "parts": [{"kind": "text", "text": "Rotate the keys"}],
            }
        },
    }
    unauthenticated = httpx.post(base + "/", json=body)
    assert unauthenticated.status_code == 401
    answer = httpx.post(
        base + "/", json=body, headers={"Authorization": f"Bearer {make_key(acme)}"}
    )
    assert answer.status_code == 200
    result = answer.json()["result"]
    task = Task.objects.get()
    assert result["kind"] == "task" and result["id"] == str(task.pk)
    assert result["contextId"] == str(task.pk) and result["status"]["state"] == "submitted"
    assert task.title == "Rotate the keys"
