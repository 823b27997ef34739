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
