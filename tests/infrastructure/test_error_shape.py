"""One error shape everywhere under /api/ (issue 8 §3): an unknown path, a body over the size
limit and an unexpected failure answer {"success": false, "error", "code"}, never Django's
HTML page; paths outside /api/ (the admin) keep Django's pages."""

import pytest
from django.db import OperationalError
from django.test import Client, override_settings
from django.urls import path
from rest_framework.decorators import api_view, authentication_classes, permission_classes

from config.urls import urlpatterns as real_urlpatterns
from tests.conftest import agent_of
from tests.factories import make_key

pytestmark = pytest.mark.django_db


def boom(request):
    raise RuntimeError("secret detail")


@api_view(["GET"])
@authentication_classes([])
@permission_classes([])
def busy(request):
    raise OperationalError("database is locked")  # SQLite past its busy timeout


# A URL conf with one view that fails, under /api/ and outside it.
urlpatterns = [
    path("api/boom", boom),
    path("boom", boom),
    path("api/busy", busy),
    *real_urlpatterns,
]
handler400 = "infrastructure.errors.bad_request"
handler404 = "infrastructure.errors.page_not_found"
handler500 = "infrastructure.errors.server_error"


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False and body["code"] == code and body["error"], body
    return body


@pytest.fixture
def client(demo):
    return Client(HTTP_AUTHORIZATION=f"Bearer {make_key(demo, agent_of(demo, 'agent-sarah'))}")


@pytest.mark.parametrize(
    "method, path",
    [("post", "/api/tasks/1/start"), ("get", "/api/nowhere"), ("get", "/api/tasks/1/events/x")],
)
def test_an_unknown_api_path_is_a_json_404(client, method, path):
    body = assert_error(getattr(client, method)(path), 404, "not_found")
    assert path in body["error"]


def test_an_unknown_api_path_is_a_json_404_without_a_key_too():
    assert_error(Client().get("/api/nowhere"), 404, "not_found")


def test_a_path_outside_the_api_keeps_django_s_html_404():
    response = Client().get("/nowhere")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_body_over_the_size_limit_is_413_too_large(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"title": "' + "x" * 2000 + '"}'
    response = client.post("/api/tasks", body, content_type="application/json")
    assert_error(response, 413, "too_large")
    small = client.post("/api/tasks", '{"title": "ok"}', content_type="application/json")
    assert small.status_code == 201, small.content


def test_a_request_django_refuses_is_a_json_400(client, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    query = "&".join(f"f{i}=1" for i in range(10))
    assert_error(client.get(f"/api/agents?{query}"), 400, "invalid")


@override_settings(ROOT_URLCONF=__name__)
def test_an_unexpected_failure_under_api_is_a_json_500(demo, caplog):
    response = Client(raise_request_exception=False).get("/api/boom")
    body = assert_error(response, 500, "server_error")
    assert "secret detail" not in body["error"]
    assert any(r.exc_info and "secret detail" in str(r.exc_info[1]) for r in caplog.records)


@override_settings(ROOT_URLCONF=__name__)
def test_an_unexpected_failure_outside_the_api_keeps_django_s_html_500():
    response = Client(raise_request_exception=False).get("/boom")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


@override_settings(ROOT_URLCONF=__name__)
def test_a_database_busy_past_its_timeout_is_a_503_to_try_again():
    response = Client(raise_request_exception=False).get("/api/busy")
    assert_error(response, 503, "database_busy")
    assert response["Retry-After"] == "1"
