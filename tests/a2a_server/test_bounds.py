"""What a caller sends the A2A door is bounded and checked before it costs anything: the body's
size, a page token's id; and a traced server answers a strange task id as an untraced one."""

import httpx
import pytest

from infrastructure import tracing
from tests.factories import make_agent, make_key, make_org
from tests.organization.mcp.live import LiveServer

from .conftest import agent_url

pytestmark = pytest.mark.django_db(transaction=True)
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
def acme(transactional_db):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada")
    return org


def rpc(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def send_message(text: str) -> dict:
    return {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_body_over_the_upload_limit_is_413_too_large(live_url, acme, settings, binding):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 5_000
    base, key = agent_url(live_url, acme, "ada"), make_key(acme)
    headers = {"Authorization": f"Bearer {key}", **V1}
    params = send_message("x" * 6_000)
    if binding == "JSONRPC":
        answer = httpx.post(base + "/", json=rpc("SendMessage", params), headers=headers)
    else:
        answer = httpx.post(base + "/message:send", json=params, headers=headers)
    assert answer.status_code == 413
    assert answer.json() == {
        "success": False,
        "code": "too_large",
        "error": "The request body is over 5000 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE).",
    }
    assert not acme.tasks.exists()


@pytest.mark.parametrize("token", ["1." + "9" * 30, "1.0", "1.²", "x.1"])
def test_a_page_token_naming_no_task_id_is_invalid_params(live_url, acme, token):
    base, key = agent_url(live_url, acme, "ada"), make_key(acme)
    answer = httpx.post(
        base + "/",
        json=rpc("ListTasks", {"pageToken": token}),
        headers={"Authorization": f"Bearer {key}", **V1},
    )
    assert answer.status_code == 200
    assert answer.json()["error"]["code"] == -32602, answer.json()  # InvalidParamsError


@pytest.mark.parametrize("task_id", ["²", "9" * 30])
def test_a_traced_server_answers_a_strange_task_id_as_not_found(
    acme, settings, monkeypatch, task_id
):
    # Tracing on without an SDK: the spans are the API's no-ops, the code around them runs.
    monkeypatch.setattr(tracing, "_enabled", True)
    key = make_key(acme)
    with LiveServer() as server:
        settings.PUBLIC_BASE_URL = server.url
        answer = httpx.get(
            agent_url(server.url, acme, "ada") + f"/tasks/{task_id}",
            headers={"Authorization": f"Bearer {key}", **V1},
        )
    assert answer.status_code == 404, answer.text
