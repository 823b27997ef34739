"""A live server of the whole ASGI app whose PUBLIC_BASE_URL is its own address, and the SDK's
client for an agent's URL."""

import httpx
import pytest
from a2a.client import ClientConfig, create_client

from tests.organization.mcp.live import LiveServer


@pytest.fixture
def live_url(transactional_db, settings):
    """A blocking SendMessage answers at once here, unless a test sets a timeout."""
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 0
    with LiveServer() as server:
        settings.PUBLIC_BASE_URL = server.url
        yield server.url


def agent_url(base: str, org, handle: str) -> str:
    return f"{base}/a2a/{org.slug}/{handle}"


async def client_for(url: str, key: str | None, binding: str = "JSONRPC", streaming=False):
    """The SDK's client built from the agent's card, sending `key` as its bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    config = ClientConfig(
        streaming=streaming,
        httpx_client=httpx.AsyncClient(headers=headers, timeout=30),
        supported_protocol_bindings=[binding],
        use_client_preference=True,
    )
    return await create_client(url, client_config=config)
