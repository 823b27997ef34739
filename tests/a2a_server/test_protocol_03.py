"""Protocol 0.3 clients on the v1.0 endpoints (the SDK's compat routes): the SDK's own 0.3
client (its compat transports) over both bindings, a raw 0.3 `message/send`; the card is v1.0."""

import uuid

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb

from tasks.models import Task
from tests.factories import give_tasks, make_agent, make_key, make_org
from tests.organization.mcp.live import run

from .conftest import agent_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme(transactional_db):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada")
    return org


def test_the_card_is_v1_only(live_url, acme):
    """The v1.0 card schema admits no 0.3 field: a 0.3 client is given the agent's URL."""
    base = agent_url(live_url, acme, "ada")
    card = httpx.get(f"{base}/.well-known/agent-card.json").json()
    assert not {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"} & set(card)
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_sdks_03_client_sends_and_reads_a_task(live_url, acme, binding):
    base = agent_url(live_url, acme, "ada")
    key = make_key(acme)

    async def scenario():
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            # A 0.3 client told the agent's URLs: the same ones, speaking 0.3.
            card = pb.AgentCard(
                name="Ada",
                supported_interfaces=[
                    pb.AgentInterface(url=base + "/", protocol_binding="JSONRPC"),
                    pb.AgentInterface(url=base, protocol_binding="HTTP+JSON"),
                ],
            )
            for interface in card.supported_interfaces:
                interface.protocol_version = "0.3"
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


def test_the_03_http_paths_take_the_same_key_and_see_only_the_callers_tasks(live_url, acme):
    theirs = make_agent(make_org("other"), "eve")
    (task,) = give_tasks(theirs, 1)
    base = agent_url(live_url, acme, "ada")
    body = {"message": {"messageId": "m-03", "role": "user", "parts": [{"text": "Hi"}]}}
    assert httpx.post(base + "/v1/message:send", json=body).status_code == 401
    assert httpx.get(f"{base}/v1/tasks/{task.pk}").status_code == 401
    key = {"Authorization": f"Bearer {make_key(acme)}"}
    assert httpx.get(f"{base}/v1/tasks/{task.pk}", headers=key).status_code == 404
    assert not acme.tasks.exists()
