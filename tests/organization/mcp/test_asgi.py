"""config.asgi: the application `make run` serves — Django, and the MCP server at /mcp."""

import pytest

from config.asgi import AgentOrgASGI, build_asgi_application
from organization.mcp_server.gate import McpHttpApp

from .live import LiveServer, raw_http

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_service_application_serves_django_and_mcp():
    from config.asgi import application

    assert isinstance(application, AgentOrgASGI)
    assert isinstance(application.mcp_app, McpHttpApp)
    with LiveServer(application) as server, raw_http(server.url) as http:
        assert http.get("/healthz").status_code == 200
        api = http.get("/api/roster")
        assert api.status_code == 401
        assert api.json()["code"] == "authentication_required"
        mcp = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert mcp.status_code == 401
        assert mcp.json()["code"] == "authentication_required"
        assert http.post("/mcp/", json={}).status_code == 401


def test_without_the_lifespan_mcp_answers_503():
    with LiveServer(build_asgi_application(), lifespan="off") as server:
        with raw_http(server.url) as http:
            response = http.post("/mcp", json={}, headers={"Authorization": "Bearer x"})
    assert response.status_code == 503
    assert response.json()["code"] == "mcp_unavailable"


def test_rest_served_inline_reads_plain_and_chunked_bodies_and_refuses_an_oversize_one(settings):
    from tasks.models import Task
    from tests.factories import make_key, make_org

    org = make_org()
    headers = {"Authorization": f"Bearer {make_key(org)}", "Content-Type": "application/json"}
    body = b'{"title": "%s"}'

    def chunked(data: bytes):
        yield data[:5]
        yield data[5:]

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    with LiveServer(build_asgi_application()) as server, raw_http(server.url) as http:
        plain = http.post("/api/tasks", content=body % b"plain", headers=headers)
        # No Content-Length: Django is told the length of what was read.
        streamed = http.post("/api/tasks", content=chunked(body % b"chunked"), headers=headers)
        huge = b'{"title": "' + b"x" * 10_000 + b'"}'
        too_large = http.post("/api/tasks", content=chunked(huge), headers=headers)
    assert plain.status_code == 201, plain.text
    assert streamed.status_code == 201, streamed.text
    assert set(Task.objects.filter(organization=org).values_list("title", flat=True)) == {
        "plain",
        "chunked",
    }
    assert too_large.status_code == 413
    assert too_large.json()["code"] == "too_large"


def test_the_inline_handler_runs_the_view_with_no_event_loop_and_one_context():
    """Django refuses database work where an event loop runs; and like a WSGI thread, the view
    keeps its context (its database connection, its cache client) from one request to the next."""
    import asyncio
    import contextvars

    from config.asgi import InlineDjango

    seen = contextvars.ContextVar("seen", default=0)
    views = []

    def wsgi_app(environ, start_response):
        try:
            asyncio.get_running_loop()
            loop_running = True
        except RuntimeError:
            loop_running = False
        seen.set(seen.get() + 1)
        views.append((loop_running, seen.get(), environ["wsgi.input"].read()))
        start_response("201 Created", [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        return [b"he", b"llo"]

    async def request(app, body: bytes):
        parts = [
            {"type": "http.request", "body": body[:2], "more_body": True},
            {"type": "http.request", "body": body[2:], "more_body": False},
        ]
        sent = []

        async def receive():
            return parts.pop(0)

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/x",
            "query_string": b"",
            "http_version": "1.1",
            "headers": [],
        }
        await app(scope, receive, send)
        return sent

    async def two_requests():
        loop = asyncio.get_running_loop()
        app = InlineDjango(wsgi_app)
        answers = await request(app, b"first"), await request(app, b"second")
        # The loop the view did not see is the running loop again once the view returned.
        assert asyncio.get_running_loop() is loop
        return answers

    first, second = asyncio.run(two_requests())
    assert views == [(False, 1, b"first"), (False, 2, b"second")]
    assert first[0] == {
        "type": "http.response.start",
        "status": 201,
        "headers": [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2")],
    }
    assert first[1] == {"type": "http.response.body", "body": b"hello"}
    assert second[0]["status"] == 201


def test_the_server_loads_the_price_table_at_start_not_in_a_request():
    """A budget's check prices the worst case of a call (costs.budgets): the table's first
    load (~60-250 ms) happens in the lifespan's startup, before the first request."""
    from genai_prices.data_snapshot import _bundled_snapshot

    _bundled_snapshot.cache_clear()
    with LiveServer(build_asgi_application()):
        assert _bundled_snapshot.cache_info().currsize == 1


def test_the_wsgi_application_loads_the_price_table_at_import():
    """gunicorn imports config.wsgi once per worker (or once, preloaded): the same warm start."""
    import importlib

    from genai_prices.data_snapshot import _bundled_snapshot

    import config.wsgi

    _bundled_snapshot.cache_clear()
    importlib.reload(config.wsgi)
    assert _bundled_snapshot.cache_info().currsize == 1
