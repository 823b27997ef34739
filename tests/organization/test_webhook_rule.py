"""Where a webhook may point (organization/webhooks.py): what saving refuses is what delivery
refuses, hosts read as the HTTP client reads them."""

import socket

import pytest
from django.core.exceptions import ValidationError

from organization import webhooks
from tests.factories import make_agent, make_org
from tests.tasks.test_webhooks import Receiver

# Hosts the HTTP client (httpx, IDNA/UTS #46) maps differently from `urlsplit`, which Django's
# URLValidator lets through: the delivery refuses each of them, so saving must too.
MAPPED_HOSTS = [
    "http://169.254.169.２５４/latest/meta-data/",  # fullwidth digits
    "http://127.0.0.０１/hook",
    "http://１２７.0.0.０１/hook",
    "http://10.0.0.ⅰⅰ/hook",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", MAPPED_HOSTS)
def test_a_url_the_delivery_refuses_is_refused_when_saved(settings, url):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    with pytest.raises(webhooks.WebhookRefused):  # what the delivery does with it
        webhooks.post(url, content=b"{}", headers={}, timeout=2)
    agent = make_agent(make_org("acme"), "agent-alex")
    agent.webhook_url = url
    with pytest.raises(ValidationError) as caught:
        agent.full_clean()
    assert "webhook_url" in caught.value.message_dict, caught.value


def test_the_next_checked_address_is_tried_when_one_refuses_the_connection(monkeypatch, settings):
    """A receiver whose name has a node down is still reached, as any client of the name would
    reach it; every address is checked before any is tried."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the receiver is on 127.0.0.1
    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host == "two-nodes.test":  # the first node is down: nothing listens on 127.0.0.2
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
                for ip in ("127.0.0.2", "127.0.0.1")
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with Receiver(failures=0) as receiver:
        port = receiver.server.server_port
        url = f"http://two-nodes.test:{port}/hook"
        response = webhooks.post(url, content=b"{}", headers={}, timeout=5)
    assert response.status_code == 200
    assert [headers["Host"] for headers, _ in receiver.requests] == [f"two-nodes.test:{port}"]
