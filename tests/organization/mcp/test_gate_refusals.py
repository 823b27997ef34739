"""What an MCP client reports when /mcp refuses its key: the refusal is a JSON-RPC error whose
message names the problem, so the SDK's client raises it as such (not "-32603 Server returned
an error response")."""

import pytest
from mcp import MCPError

from organization.models import ApiKey
from organization.services import api_key_revoke

from .live import http_client, raw_http, run

pytestmark = pytest.mark.django_db(transaction=True)


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def refusal_of(url: str, key: str | None, mode: str) -> MCPError:
    async def scenario():
        async with http_client(url, key, mode=mode, read_timeout_seconds=30) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as raised:
        run(scenario())
    (error,) = [e for e in leaves(raised.value) if isinstance(e, MCPError)]
    return error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_reports_why_its_key_was_refused(live_url, demo_org, key_of, mode):
    revoked = key_of(demo_org, "agent-sarah")
    api_key_revoke(key=ApiKey.objects.get(prefix=revoked.split("_")[1]))
    cases = [
        (None, "Authentication required: send 'Authorization: Bearer <agent key>'."),
        ("ao_000000000000_not-a-real-secret", "Invalid or revoked API key."),
        (revoked, "Invalid or revoked API key."),
    ]
    for key, message in cases:
        error = refusal_of(live_url, key, mode)
        assert error.error.code == -32001, key
        assert error.error.message == message
        assert message in str(error)
        assert "Server returned an error response" not in str(error)
        code = "authentication_required" if key is None else "authentication_failed"
        assert error.error.data == {"code": code, "status": 401}


def test_a_refusal_is_a_json_rpc_error_that_keeps_our_code(live_url):
    with raw_http(live_url) as http:
        response = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
            headers={"Authorization": "Bearer ao_x_y"},
        )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32001,
            "message": "Invalid or revoked API key.",
            "data": {"code": "authentication_failed", "status": 401},
        },
        "success": False,
        "code": "authentication_failed",
    }
