"""/mcp at its HTTP edges: a browser on an allowed origin (its CORS preflight, then answers it
may read), the body limit of the API (DATA_UPLOAD_MAX_MEMORY_SIZE), and refusals in our JSON
shape where the MCP SDK would answer text/plain."""

import json

import pytest
from django.conf import settings

from tests.organization.mcp.live import raw_http

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = "application/json, text/event-stream"
INSPECTOR = (
    "http://localhost:6274"  # the MCP Inspector's origin, allowed by default ("http://localhost:*")
)


def test_a_browser_on_an_allowed_origin_gets_a_cors_preflight_answer(live_url):
    """A browser sends a CORS preflight (OPTIONS, no credentials) before a POST with
    Authorization: it is answered before any key, for an allowed origin only."""
    with raw_http(live_url) as http:
        response = http.options(
            "/mcp",
            headers={
                "Origin": INSPECTOR,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
            },
        )
    assert response.status_code == 204, (response.status_code, response.text)
    assert response.headers.get("access-control-allow-origin") == INSPECTOR
    allowed = response.headers.get("access-control-allow-headers", "").lower()
    assert {"authorization", "content-type", "mcp-protocol-version"} <= {
        h.strip() for h in allowed.split(",")
    }
    with raw_http(live_url) as http:
        refused = http.options("/mcp", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and refused.json()["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in refused.headers


def test_an_allowed_origins_post_answer_is_readable_by_the_browser(live_url, demo_org, key_of):
    key = key_of(demo_org, "agent-sarah")
    with raw_http(live_url) as http:
        response = http.post(
            "/mcp",
            json=PING,
            headers={"Origin": INSPECTOR, "Authorization": f"Bearer {key}", "Accept": ACCEPT},
        )
    assert response.status_code == 200
    assert response.headers.get("access-control-allow-origin") == INSPECTOR
    assert "mcp-session-id" in response.headers.get("access-control-expose-headers", "")
    with raw_http(live_url) as http:  # a refusal too, or the browser could not read why
        refused = http.post("/mcp", json=PING, headers={"Origin": INSPECTOR, "Accept": ACCEPT})
    assert refused.status_code == 401
    assert refused.headers.get("access-control-allow-origin") == INSPECTOR


def test_a_body_over_data_upload_max_memory_size_is_413_too_large(live_url, demo_org, key_of):
    """docs/configuration.md: DATA_UPLOAD_MAX_MEMORY_SIZE is the largest request body, a bigger
    one answers 413 `too_large`. /mcp takes up to the MCP SDK's own 4 MiB instead."""
    key = key_of(demo_org, "agent-sarah")
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 100_000
    assert size < 4 * 1024 * 1024
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_organization_roster", "arguments": {"expertise": "x" * size}},
    }
    with raw_http(live_url) as http:
        response = http.post(
            "/mcp", json=body, headers={"Authorization": f"Bearer {key}", "Accept": ACCEPT}
        )
    assert response.status_code == 413, response.text[:300]
    assert response.json()["code"] == "too_large"


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        (json.dumps(PING).encode(), "text/plain", 415, "unsupported_media_type"),
        (b" " * (4 * 1024 * 1024 + 1), "application/json", 413, "too_large"),
    ],
    ids=["wrong-content-type", "over-4MiB"],
)
def test_mcp_refusals_are_json_not_text_plain(
    live_url, demo_org, key_of, content, content_type, status, code
):
    """The SDK's own refusals of these were text/plain, which an MCP client cannot parse."""
    key = key_of(demo_org, "agent-sarah")
    with raw_http(live_url) as http:
        response = http.post(
            "/mcp",
            content=content,
            headers={
                "Authorization": f"Bearer {key}",
                "Accept": ACCEPT,
                "Content-Type": content_type,
            },
        )
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == code


def test_a_chunked_body_over_the_limit_is_413_too(live_url, demo_org, key_of):
    """No Content-Length to trust: the body is counted as it comes, and not read past the limit."""
    key = key_of(demo_org, "agent-sarah")
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def chunks():
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}}'

    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": ACCEPT,
        "Content-Type": "application/json",
    }
    with raw_http(live_url) as http:
        response = http.post("/mcp", content=chunks(), headers=headers)
        assert response.status_code == 413 and response.json()["code"] == "too_large"
        small = http.post("/mcp", content=iter([json.dumps(PING).encode()]), headers=headers)
    assert small.status_code == 200, small.text


def test_a_stateless_server_opens_no_stream_on_get(live_url, demo_org, key_of):
    """A GET's stream would carry what the server sends unasked; stateless, it has nothing to send,
    so the stream would only hold a connection for ever: 405, as the MCP spec says."""
    key = key_of(demo_org, "agent-sarah")
    with raw_http(live_url) as http:
        response = http.get(
            "/mcp", headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
        )
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert "POST" in response.headers["allow"]
