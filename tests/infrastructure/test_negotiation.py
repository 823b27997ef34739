"""The API's content negotiation (infrastructure/negotiation.py): DRF's own choice for every Accept
header and ?format=, with */* and application/json (the short cut) answered at once."""

import pytest
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.test import APIRequestFactory

from infrastructure.negotiation import ContentNegotiation

RENDERERS = [renderer() for renderer in api_settings.DEFAULT_RENDERER_CLASSES]


def choice(negotiation, path, accept, format_suffix=None):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(path, **headers))
    renderer, media_type = negotiation.select_renderer(request, RENDERERS, format_suffix)
    return type(renderer).__name__, media_type


@pytest.mark.parametrize(
    ("path", "accept", "suffix"),
    [
        ("/api/roster", None, None),
        ("/api/roster", "*/*", None),
        ("/api/roster", "application/json", None),
        ("/api/roster", "application/json; indent=4", None),
        ("/api/roster", "text/html,application/xhtml+xml,*/*;q=0.8", None),
        ("/api/roster?format=api", None, None),
        ("/api/roster?format=json", None, None),
        ("/api/roster", "*/*", "api"),
    ],
)
def test_it_chooses_what_drf_chooses(path, accept, suffix):
    assert choice(ContentNegotiation(), path, accept, suffix) == choice(
        DefaultContentNegotiation(), path, accept, suffix
    )


def test_the_api_negotiates_with_it(demo, org_client):
    client = org_client(demo)
    assert api_settings.DEFAULT_CONTENT_NEGOTIATION_CLASS is ContentNegotiation
    assert client.get("/api/roster")["Content-Type"] == "application/json"
    browsable = client.get("/api/roster", HTTP_ACCEPT="text/html")
    assert browsable.status_code == 200 and browsable["Content-Type"].startswith("text/html")
    refused = client.get("/api/roster", HTTP_ACCEPT="application/xml")
    assert refused.status_code == 406
    assert refused.json()["code"] == "not_acceptable"


@pytest.mark.parametrize(
    ("path", "accept"),
    [("/api/tasks/999999", "text/html"), ("/api/tasks/999999?format=api", None)],
)
def test_an_error_is_json_for_the_browsable_api_too(demo, org_client, path, accept):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    response = org_client(demo).get(path, **headers)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "task_not_found"


def test_an_unauthenticated_browser_gets_json_too(client):
    response = client.get("/api/roster", HTTP_ACCEPT="text/html")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "authentication_required"
