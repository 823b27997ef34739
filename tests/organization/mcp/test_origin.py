"""/mcp checks Origin (the MCP spec, against DNS rebinding) and Host, before anything else."""

import pytest

from organization.mcp_server.gate import origin_allowed

from .live import raw_http

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def post(live_url, key, **headers):
    """An MCP initialize request with `key` and extra headers."""
    with raw_http(live_url) as http:
        return http.post(
            "/mcp",
            json=INITIALIZE,
            headers={
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {key}",
                **headers,
            },
        )


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://localhost.evil.example"]
)
def test_a_browser_origin_that_is_not_allowed_gets_403(live_url, demo_org, key_of, origin):
    response = post(live_url, key_of(demo_org, "agent-sarah"), Origin=origin)
    assert response.status_code == 403
    assert response.json() == {
        "success": False,
        "error": f"Origin {origin!r} is not allowed (MCP_ALLOWED_ORIGINS).",
        "code": "origin_not_allowed",
    }


def test_it_is_refused_before_the_key_is_looked_at(live_url):
    with raw_http(live_url) as http:
        response = http.post("/mcp", json=PING, headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert response.json()["code"] == "origin_not_allowed"


def test_allowed_origins_and_clients_without_origin_pass(live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-sarah")
    assert post(live_url, key).status_code == 200
    assert post(live_url, key, Origin="http://localhost:6274").status_code == 200


def test_the_list_is_configurable(live_url, demo_org, key_of, settings):
    settings.MCP_ALLOWED_ORIGINS = ["https://inspector.example"]
    key = key_of(demo_org, "agent-sarah")
    assert post(live_url, key, Origin="https://inspector.example").status_code == 200
    assert post(live_url, key, Origin="http://localhost:6274").status_code == 403


def test_a_host_outside_allowed_hosts_gets_400(live_url, demo_org, key_of):
    response = post(live_url, key_of(demo_org, "agent-sarah"), Host="rebound.evil.example")
    assert response.status_code == 400
    assert response.json()["code"] == "disallowed_host"


@pytest.mark.parametrize(
    "origin, allowed",
    [
        ("http://localhost:6274", True),
        ("http://localhost", True),
        ("http://127.0.0.1:8000", True),
        ("http://[::1]:8000", True),
        ("https://localhost:6274", False),
        ("http://localhost:6274.evil.example", False),
        ("http://localhost.evil.example", False),
        ("https://agents.example.com", False),
    ],
)
def test_port_wildcards_match_ports_only(origin, allowed):
    defaults = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
    assert origin_allowed(origin, defaults) is allowed
