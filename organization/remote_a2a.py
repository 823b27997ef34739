"""A remote A2A agent's card and the one way we reach it: under the outbound-address rule of
webhooks (organization/webhooks.py), with a timeout and a size limit on every answer.

The card is fetched and checked when the agent is saved (an answer that is no A2A v1.0 card is
refused with the reason); its skills become the agent's expertise. runtime/remote_a2a.py sends
the agent's work through `RemoteTransport`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2 as pb
from django.conf import settings
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from infrastructure.inputs import value_problem

from .webhooks import WebhookRefused, check_url, resolve_checked, validate_outbound_url

# A card is a small document; anything larger is not one we take.
MAX_CARD_BYTES = 256 * 1024
# The bindings our client speaks (the SDK's JSON-RPC and HTTP+JSON transports).
BINDINGS = ("JSONRPC", "HTTP+JSON")
EXPERTISE_MAX_ITEMS = 50
EXPERTISE_ITEM_MAX_LENGTH = 100


class CardRefused(Exception):
    """The URL does not lead to an A2A agent card we may use; the message says why."""


class ResponseTooLarge(httpx.ReadError):
    """A remote answer longer than its limit: it is not read further."""


def validate_card_url(value: str) -> None:
    """The save-time rule of the card's URL: http(s), to a public address unless
    WEBHOOK_ALLOW_PRIVATE_NETWORKS (the rule outbound webhooks obey)."""
    validate_outbound_url(value, what="A2A card URLs", code="a2a_card_url_refused")


def fetch_card(url: str) -> dict:
    """The card at `url`, checked and as A2A v1.0 JSON; CardRefused says why not.

    Connects only to addresses the rule allows, follows no redirect, reads at most
    MAX_CARD_BYTES, all within A2A_REMOTE_TIMEOUT_SECONDS (the whole fetch, not each read)."""
    timeout = settings.A2A_REMOTE_TIMEOUT_SECONDS
    try:
        check_url(url)
        body = asyncio.run(asyncio.wait_for(_card_body(url), timeout))
    except WebhookRefused as exc:
        raise CardRefused(f"{url} is not allowed: {exc}") from exc
    except TimeoutError as exc:
        raise CardRefused(
            f"{url} did not answer: ReadTimeout: the card took longer than {timeout} s "
            "(A2A_REMOTE_TIMEOUT_SECONDS)"
        ) from exc
    except httpx.HTTPError as exc:
        raise CardRefused(f"{url} did not answer: {type(exc).__name__}: {exc}") from exc
    try:
        data = json.loads(body)
        card = parse_agent_card(data)
    except (ValueError, ParseError, RecursionError) as exc:
        raise CardRefused(f"{url} is not an A2A agent card: {exc}") from exc
    check_card(card, url)
    stored = MessageToDict(card)
    problem = value_problem(stored, "card")
    if problem:  # what the database cannot hold (a NUL character)
        raise CardRefused(f"{url} is not an A2A agent card we can store: {problem}")
    return stored


async def _card_body(url: str) -> bytes:
    async with (
        httpx.AsyncClient(
            transport=RemoteTransport(max_bytes=MAX_CARD_BYTES),
            trust_env=False,
            follow_redirects=False,
            timeout=settings.A2A_REMOTE_TIMEOUT_SECONDS,
        ) as client,
        client.stream("GET", url, headers={"Accept": "application/json"}) as response,
    ):
        if response.status_code != 200:
            raise CardRefused(f"{url} answered HTTP {response.status_code}, not a card")
        return await response.aread()


def check_card(card: pb.AgentCard, url: str) -> None:
    """A card we can send work to: a name, and an interface in a binding we speak whose URL
    the outbound rule allows."""
    if not card.name:
        raise CardRefused(f"{url} is not an A2A agent card: it has no name")
    usable = [i for i in card.supported_interfaces if i.protocol_binding in BINDINGS and i.url]
    if not usable:
        raise CardRefused(
            f"{url} is not an A2A agent card we can use: no JSON-RPC or HTTP+JSON interface "
            "(supportedInterfaces)"
        )
    for interface in usable:
        try:
            check_url(interface.url)
        except WebhookRefused as exc:
            raise CardRefused(
                f"{url}: its interface {interface.url} is not allowed: {exc}"
            ) from exc


def card_of(stored: dict) -> pb.AgentCard:
    """The stored card (as `fetch_card` returned it) as the SDK's message."""
    return ParseDict(stored, pb.AgentCard(), ignore_unknown_fields=True)


def expertise_of(stored: dict) -> list[str]:
    """The card's skills as expertise terms: each skill's name (its id when unnamed), once."""
    terms: list[str] = []
    for skill in stored.get("skills", []):
        term = str(skill.get("name") or skill.get("id") or "").strip()[:EXPERTISE_ITEM_MAX_LENGTH]
        if term and term not in terms:
            terms.append(term)
    return terms[:EXPERTISE_MAX_ITEMS]


class _LimitedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, limit: int):
        self._stream, self._limit, self._read = stream, limit, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._read += len(chunk)
            if self._read > self._limit:
                raise ResponseTooLarge(f"the answer is longer than {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class RemoteTransport(httpx.AsyncHTTPTransport):
    """The SDK client's transport to a remote agent: connects only to addresses the outbound
    rule allows (Host and TLS name stay the URL's) and reads at most `max_bytes` of an answer."""

    def __init__(self, *, max_bytes: int, **kwargs):
        super().__init__(**kwargs)
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _, host, port = check_url(str(request.url))
        addresses = await asyncio.to_thread(resolve_checked, host, port)
        url = request.url
        connect_timeout = (request.extensions.get("timeout") or {}).get("connect")
        give_up = None if connect_timeout is None else time.monotonic() + connect_timeout
        for n, address in enumerate(addresses, start=1):
            if address != host:
                request.url = url.copy_with(host=address)
                request.extensions = {**request.extensions, "sni_hostname": host}
            try:
                response = await super().handle_async_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if n == len(addresses) or (give_up is not None and time.monotonic() >= give_up):
                    raise
                continue
            return httpx.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=_LimitedStream(response.stream, self._max_bytes),
                extensions=response.extensions,
            )
        raise AssertionError("unreachable")  # pragma: no cover


def remote_client(token: str | None) -> httpx.AsyncClient:
    """The HTTP client of one exchange with a remote agent: the outbound rule, no proxies from
    the environment, no redirects, A2A_REMOTE_TIMEOUT_SECONDS per call, bounded answers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=RemoteTransport(max_bytes=settings.A2A_REMOTE_MAX_RESPONSE_BYTES),
        headers=headers,
        trust_env=False,
        follow_redirects=False,
        timeout=settings.A2A_REMOTE_TIMEOUT_SECONDS,
    )
