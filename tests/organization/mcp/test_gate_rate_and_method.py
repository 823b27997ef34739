"""Review of the /mcp door (organization/mcp_server/gate.py): the same key rules as REST."""

import json

import pytest

from tests.conftest import KeyClient
from tests.organization.mcp.live import raw_http

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"
ROSTER_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "get_organization_roster", "arguments": {"filter": "all"}},
}


def refused_code(response) -> str | None:
    """The `code` of a refusal, whether the gate answered it (HTTP error, our body) or the
    tool did (an MCP tool error whose text is our body); None for a success."""
    if response.status_code >= 400:
        return response.json().get("code")
    result = response.json().get("result") or {}
    if result.get("isError"):
        return json.loads(result["content"][0]["text"])["code"]
    return None


def test_a_key_over_api_throttle_rate_is_refused_over_mcp_too(live_url, demo_org, key_of, settings):
    """API_THROTTLE_RATE is "requests per API key" (docs/configuration.md) and the MCP door runs
    the same registry as REST call-tool "whichever door the request came through"
    (docs/design.md). Today /mcp never counts a request, so a key that REST refuses with 429
    `rate_limited` goes on calling every tool without limit over /mcp: the per-key rate limit
    is bypassed by switching door."""
    settings.API_THROTTLE_RATE = "2/min"
    key = key_of(demo_org, "agent-sarah")
    rest = KeyClient(key)
    # Control: REST refuses this key's third request within the minute.
    assert rest.get("/api/roster").status_code == 200
    assert rest.get("/api/roster").status_code == 200
    over = rest.get("/api/roster")
    assert over.status_code == 429 and over.json()["code"] == "rate_limited"

    headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT}
    codes = []
    with raw_http(live_url) as http:
        for _ in range(4):
            codes.append(refused_code(http.post("/mcp", json=ROSTER_CALL, headers=headers)))
    assert "rate_limited" in codes, (
        f"a throttled key called tools over /mcp 4 times unrefused: {codes}"
    )


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "authentication_required"),
        ("Bearer ao_000000000000_not-a-real-secret", "authentication_failed"),
    ],
    ids=["no-key", "bad-key"],
)
def test_a_get_without_a_valid_key_is_401_like_every_other_request(live_url, authorization, code):
    """docs/mcp.md: "Every request carries Authorization: Bearer <key>: no key → 401
    `authentication_required`, a bad or revoked key → 401 `authentication_failed`"; only Host
    and Origin are checked "before the key". The gate answers a GET its 405
    `method_not_allowed` before it looks at the key (McpHttpApp.__call__), so an
    unauthenticated or revoked caller is answered as if its key were fine, and the refusal of
    a bad key differs by HTTP method."""
    headers = {"Accept": "text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    with raw_http(live_url) as http:
        response = http.get("/mcp", headers=headers)
    assert (response.status_code, response.json()["code"]) == (401, code)
