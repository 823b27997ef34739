"""Where a webhook may point, checked when it is saved and again when it is delivered (SSRF).

http or https to public addresses only (WEBHOOK_ALLOW_PRIVATE_NETWORKS lifts the address part);
delivery connects only to the addresses it checked and follows no redirect.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError

SCHEMES = ("http", "https")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

# What tenant staff see of a delivery attempt: coarse on purpose, so the admin is no oracle of
# which internal ports answer (the detail goes to the worker's log only).
REFUSED_ADDRESS = "refused address"
REFUSED_SCHEME = "refused scheme"
NO_ANSWER = "no answer"


HTTP_STATUS = re.compile(r"HTTP \d{3}")


def outcome_of(status: str, last_error: str) -> str:
    """What staff see of a delivery: `delivered`, `pending` or `failed`, with a coarse reason."""
    if status == "delivered" or not last_error:
        return status
    known = {REFUSED_ADDRESS, REFUSED_SCHEME, NO_ANSWER}
    http = HTTP_STATUS.search(last_error)
    reason = last_error if last_error in known else http.group(0) if http else NO_ANSWER
    return f"{status}: {reason}"


class WebhookRefused(Exception):
    """The URL breaks the rule; `outcome` is what staff are shown."""

    def __init__(self, outcome: str, detail: str):
        super().__init__(detail)
        self.outcome = outcome


IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64, compatible)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IP) -> bool:
    """Not loopback, private, link-local, shared, reserved, multicast or unspecified."""
    if ip.version == 6:
        embedded = _embedded_ipv4(ip)
        if embedded is not None and not is_public(embedded):
            return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
        # fec0::/10, deprecated site-local: `is_global` is still true for it on Python 3.11.
        or getattr(ip, "is_site_local", False)
    )


def _literal(host: str) -> IP | None:
    """`host` as an address, including the short and integer IPv4 forms resolvers accept."""
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))  # "127.1", "2130706433", "0x7f.1"
    except OSError:
        return None


def _allow_private() -> bool:
    return settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an allowed URL, else WebhookRefused. What saving checks."""
    try:
        parts = urlsplit(url)
        port = parts.port
        # The host as the delivery's client reads it: httpx maps it (IDNA, UTS #46), so that
        # "127。0。0。1" is 127.0.0.1, or refuses it ("169.254.169.２５４", fullwidth digits,
        # which Django's URLValidator lets through): what saving accepts, delivery may use.
        client_host = httpx.URL(url).host
    except (ValueError, httpx.InvalidURL) as exc:
        raise WebhookRefused(REFUSED_ADDRESS, f"malformed URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise WebhookRefused(REFUSED_SCHEME, "only http and https URLs are allowed")
    host = client_host.rstrip(".").lower()
    if not host:
        raise WebhookRefused(REFUSED_ADDRESS, "the URL has no host")
    port = port or (443 if scheme == "https" else 80)
    if _allow_private():
        return scheme, host, port
    if host == "localhost" or host.endswith(".localhost"):
        raise WebhookRefused(REFUSED_ADDRESS, f"{host} is this machine")
    ip = _literal(host)
    if ip is not None and not is_public(ip):
        raise WebhookRefused(REFUSED_ADDRESS, f"{ip} is not a public address")
    return scheme, host, port


def validate_outbound_url(value: str, *, what: str, code: str) -> None:
    """The save-time rule of a URL the service will call (`what`: "Webhook URLs"), as the
    ValidationError `code` naming the reason."""
    if not value:
        return
    try:
        check_url(value)
    except WebhookRefused as exc:
        raise ValidationError(
            f"{what} must be http(s) and point to a public address (%(reason)s).",
            code=code,
            params={"reason": str(exc)},
        ) from exc


def validate_webhook_url(value: str) -> None:
    """The save-time rule, for the model, forms and serializers alike."""
    validate_outbound_url(value, what="Webhook URLs", code="webhook_url_refused")


# A name's further addresses are tried when one refuses the connection or does not answer it,
# as a client given the name would (socket.create_connection tries each): a receiver with a
# node down is still reached. A few at most, each within the attempt's timeout.
MAX_ADDRESSES = 3


def resolve_checked(host: str, port: int) -> list[str]:
    """The addresses to connect to, in the resolver's order: every address `host` resolves to
    must pass, else refused."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from exc
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addresses:
        raise httpx.ConnectError(f"{host} resolves to no address")
    if not _allow_private():
        refused = [str(a) for a in addresses if not is_public(a)]
        if refused:
            raise WebhookRefused(REFUSED_ADDRESS, f"{host} resolves to {', '.join(refused)}")
    return list(dict.fromkeys(str(a) for a in addresses))[:MAX_ADDRESSES]


class PinnedTransport(httpx.HTTPTransport):
    """Connects to the addresses it checked; the Host header and TLS name stay the URL's host."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _, host, port = check_url(str(request.url))
        addresses = resolve_checked(host, port)
        url = request.url
        # All the tries together within one connect timeout, so the attempt's lease still
        # covers it (tasks.webhooks.attempt_lease).
        connect_timeout = (request.extensions.get("timeout") or {}).get("connect")
        give_up = None if connect_timeout is None else time.monotonic() + connect_timeout
        for n, address in enumerate(addresses, start=1):
            if address != host:
                # The Host header was set from the original URL when the request was built.
                request.url = url.copy_with(host=address)
                request.extensions = {**request.extensions, "sni_hostname": host}
            try:
                return super().handle_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                # Nothing was sent: the next address may take it.
                if n == len(addresses) or (give_up is not None and time.monotonic() >= give_up):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover


def post(url: str, *, content: bytes, headers: dict, timeout: float) -> httpx.Response:
    """POST under the rule: raises WebhookRefused, or httpx errors when nothing answers.

    The body of the answer is never read: a receiver could send one that never ends.
    """
    check_url(url)
    with httpx.Client(
        transport=PinnedTransport(),
        # No proxies from the environment (they would connect for us, unchecked); no redirects.
        trust_env=False,
        follow_redirects=False,
        timeout=timeout,
    ) as client:
        try:
            with client.stream("POST", url, content=content, headers=headers) as response:
                return response
        except httpx.InvalidURL as exc:  # a stored row no form checked
            raise WebhookRefused(REFUSED_ADDRESS, f"malformed URL: {exc}") from exc
