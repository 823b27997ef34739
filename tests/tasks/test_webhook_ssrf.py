"""Webhooks cannot be aimed at our own network (SSRF, issue 8): refused when saved and delivered."""

import socket

import pytest
from django.core.exceptions import ValidationError

from organization import webhooks
from organization.models import Agent
from tasks.models import WebhookDelivery
from tasks.rules import SYSTEM
from tasks.services import task_create
from tests.conftest import requires_postgres
from tests.factories import make_agent, make_org
from tests.organization.test_admin import change_url, form_of, root, root_client  # noqa: F401
from tests.tasks.test_sweep import needs_redis
from tests.tasks.test_webhooks import Receiver, poll
from tests.tls import self_signed

REFUSED = [
    "http://127.0.0.1/hook",
    "http://127.1/hook",  # short IPv4 form, resolved as 127.0.0.1
    "http://2130706433/hook",  # integer form of 127.0.0.1
    "http://[::1]/hook",
    "http://localhost:8000/hook",
    "http://api.localhost/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.5/hook",
    "http://172.16.3.4/hook",
    "http://192.168.1.1/hook",
    "http://100.64.0.1/hook",  # carrier-grade NAT
    "http://0.0.0.0/hook",
    "http://224.0.0.1/hook",
    "http://240.0.0.1/hook",
    "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped IPv6
    "http://[::ffff:169.254.169.254]/hook",
    "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
    "http://[fe80::1]/hook",
    "http://[fc00::1]/hook",
    "http://[fec0::1]/hook",
    "http://[::]/hook",
    "http://[ff02::1]/hook",
    "ftp://hooks.example.com/hook",
    "file:///etc/passwd",
    "gopher://hooks.example.com/",
]
ACCEPTED = [
    "https://hooks.example.com/agent",
    "http://93.184.215.14:8080/hook",
    "https://[2606:4700:4700::1111]/hook",
]


@pytest.fixture
def alex(db):
    return make_agent(make_org("acme"), "agent-alex")


@pytest.mark.parametrize("url", REFUSED)
def test_a_private_or_non_http_webhook_url_is_refused_when_saved(alex, url):
    alex.webhook_url = url
    with pytest.raises(ValidationError) as caught:
        alex.full_clean()
    assert "webhook_url" in caught.value.message_dict, caught.value


@pytest.mark.parametrize("url", ACCEPTED)
def test_a_public_webhook_url_is_accepted(alex, url):
    alex.webhook_url = url
    alex.full_clean()


def test_allowing_private_networks_lifts_the_address_rule_not_the_scheme_rule(alex, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    for url in ("http://127.0.0.1:9000/hook", "http://localhost/hook", "http://[::1]/h"):
        alex.webhook_url = url
        alex.full_clean()
    alex.webhook_url = "ftp://127.0.0.1/hook"
    with pytest.raises(ValidationError):
        alex.full_clean()


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[::1]:8000/"])
def test_the_admin_form_refuses_a_private_webhook_url(root_client, demo, url):  # noqa: F811
    alex = demo.agents.get(handle="agent-alex")
    page = change_url(alex)
    data = form_of(root_client, page, "agent_form")
    data["webhook_url"] = url
    response = root_client.post(page, data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "public address" in errors["webhook_url"][0]
    alex.refresh_from_db()
    assert alex.webhook_url == ""


def test_webhook_url_is_not_settable_through_the_api(demo, org_client):
    # The save-time rule has only the admin's door to guard: no API route writes webhook_url.
    response = org_client(demo).get("/api/agents/agent-alex")
    assert response.status_code == 200
    assert "webhook_url" not in response.json()


# --- delivery time ----------------------------------------------------------------------


def hooked_agents(org, port: int) -> dict[str, Agent]:
    """Agents whose stored webhook_url bypassed validation (an old row, a raw UPDATE)."""
    urls = {
        "agent-name": f"http://localhost:{port}/hook",  # a hostname resolving to 127.0.0.1
        "agent-mapped": f"http://[::ffff:127.0.0.1]:{port}/hook",
        "agent-short": f"http://127.1:{port}/hook",
        "agent-scheme": f"ftp://127.0.0.1:{port}/hook",
    }
    agents = {}
    for handle, url in urls.items():
        agent = make_agent(org, handle)
        Agent.objects.filter(pk=agent.pk).update(webhook_url=url)
        agent.refresh_from_db()
        agents[handle] = agent
    return agents


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_stored_private_webhook_is_refused_at_delivery_and_never_contacted(settings):
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    settings.TASKS_WEBHOOK_RETRY_BASE_SECONDS = 0.05
    org = make_org("ssrf")
    with Receiver(failures=0) as receiver:
        agents = hooked_agents(org, receiver.server.server_port)
        app.control.purge()
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            for agent in agents.values():
                task_create(org=org, actor=SYSTEM, title="Read the metadata", assignee=agent)
            assert poll(
                lambda: not WebhookDelivery.objects.filter(organization=org, status="pending")
            )
    outcomes = {
        d.agent.handle: (d.status, d.attempts, d.last_error)
        for d in WebhookDelivery.objects.filter(organization=org).select_related("agent")
    }
    assert outcomes == {
        "agent-name": ("failed", 1, "refused address"),
        "agent-mapped": ("failed", 1, "refused address"),
        "agent-short": ("failed", 1, "refused address"),
        "agent-scheme": ("failed", 1, "refused scheme"),
    }
    assert receiver.requests == []


def test_every_resolved_address_is_checked(monkeypatch, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    answers = {"mixed.test": ["93.184.215.14", "127.0.0.1"]}
    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in answers[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with pytest.raises(webhooks.WebhookRefused) as caught:
        webhooks.post("http://mixed.test/hook", content=b"{}", headers={}, timeout=2)
    assert caught.value.outcome == "refused address"


def test_it_connects_to_the_address_it_checked_keeping_the_host_header(monkeypatch, settings):
    """DNS rebinding: a second lookup would answer elsewhere; the checked address is used."""
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the receiver is on 127.0.0.1
    lookups = []
    real = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            lookups.append(host)
            ip = "127.0.0.1" if len(lookups) == 1 else "10.255.255.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with Receiver(failures=0) as receiver:
        port = receiver.server.server_port
        response = webhooks.post(
            f"http://rebind.test:{port}/hook", content=b"{}", headers={}, timeout=5
        )
    assert response.status_code == 200
    assert lookups == ["rebind.test"]
    assert receiver.requests[0][0]["Host"] == f"rebind.test:{port}"


def test_redirects_are_not_followed(settings):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    paths = []

    class Redirecting(BaseHTTPRequestHandler):
        def do_POST(self):
            paths.append(self.path)
            self.send_response(307)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        response = webhooks.post(url, content=b"{}", headers={}, timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    assert response.status_code == 307 and paths == ["/hook"]


@pytest.mark.parametrize(
    "status, last_error, shown",
    [
        ("failed", "ConnectError: [Errno 111] Connection refused", "failed: no answer"),
        ("failed", "ReadTimeout: timed out", "failed: no answer"),
        ("failed", "DeliveryFailed: HTTP 500", "failed: HTTP 500"),
        ("failed", "refused address", "failed: refused address"),
        ("pending", "no answer", "pending: no answer"),
        ("delivered", "", "delivered"),
    ],
)
def test_staff_see_a_coarse_outcome(status, last_error, shown):
    assert webhooks.outcome_of(status, last_error) == shown


@requires_postgres()
@needs_redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_closed_port_shows_no_answer_not_the_exception(settings, client):
    from celery.contrib.testing.worker import start_worker
    from django.contrib.auth import get_user_model

    from config.celery import app

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    settings.TASKS_WEBHOOK_MAX_RETRIES = 0
    org = make_org("closed")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = make_agent(org, "agent-closed", webhook_url=f"http://127.0.0.1:{port}/hook")
    app.control.purge()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        task_create(org=org, actor=SYSTEM, title="t", assignee=agent)
        assert poll(lambda: WebhookDelivery.objects.filter(agent=agent, status="failed").exists())
    delivery = WebhookDelivery.objects.get(agent=agent)
    assert delivery.last_error == "no answer"
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    page = client.get(f"/admin/tasks/webhookdelivery/{delivery.pk}/change/").content.decode()
    listing = client.get("/admin/tasks/webhookdelivery/").content.decode()
    for html in (page, listing):
        assert "failed: no answer" in html
        assert "ConnectError" not in html and "Errno" not in html


def test_https_keeps_the_hostname_for_sni_and_certificate_checks(tmp_path, monkeypatch, settings):
    """Pinned to the checked address, TLS still verifies the certificate against the URL's host."""
    import shutil
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    import httpx

    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = self_signed(tmp_path, "hook.test", "-addext", "subjectAltName=DNS:hook.test")
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host in ("hook.test", "other.test"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    hosts = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            hosts.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    Thread(target=server.serve_forever, daemon=True).start()
    trust = ssl.create_default_context(cafile=str(cert))
    port = server.server_port
    try:
        with httpx.Client(transport=webhooks.PinnedTransport(verify=trust)) as client:
            assert client.post(f"https://hook.test:{port}/h", content=b"{}").status_code == 200
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                client.post(f"https://other.test:{port}/h", content=b"{}")
    finally:
        server.shutdown()
        server.server_close()
    assert hosts == [f"hook.test:{port}"]


@pytest.mark.django_db
def test_the_admin_detail_page_never_shows_a_stored_exception(root_client):  # noqa: F811
    """Rows from before the SSRF rule kept exception text that tells which internal ports answer."""
    org = make_org("old-rows")
    agent = make_agent(org, "agent-old")
    delivery = WebhookDelivery.objects.create(
        organization=org,
        agent=agent,
        url="http://10.0.0.5:6379/",
        status="failed",
        attempts=1,
        last_error="ConnectError: [Errno 111] Connection refused by 10.0.0.5:6379",
    )
    page = root_client.get(f"/admin/tasks/webhookdelivery/{delivery.pk}/change/")
    assert page.status_code == 200
    assert "Errno 111" not in page.content.decode()
