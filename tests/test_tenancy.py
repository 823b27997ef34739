"""Authentication and tenancy of every API endpoint, driven by the tables in tests/*/endpoints.py.

See tests/tenancy.py for the contract of a row.
"""

import importlib
import json
import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from organization.models import Organization
from tests.conftest import KeyClient
from tests.factories import make_agent, make_key, make_org
from tests.tenancy import COLLECTION, OBJECT, SIGNATURE, Endpoint

TESTS_DIR = Path(__file__).resolve().parent
EXCLUDED_ROUTES = ("/api/schema/", "/api/docs/")
IGNORED_METHODS = {"options", "head", "trace"}


def collect_endpoints() -> list[Endpoint]:
    """Every `ENDPOINTS` of tests/*/endpoints.py; an app without a table contributes nothing."""
    endpoints = []
    for module_path in sorted(TESTS_DIR.glob("*/endpoints.py")):
        module = importlib.import_module(f"tests.{module_path.parent.name}.endpoints")
        endpoints.extend(getattr(module, "ENDPOINTS", []))
    return endpoints


ENDPOINTS = collect_endpoints()
OBJECT_ENDPOINTS = [e for e in ENDPOINTS if e.kind == OBJECT]
COLLECTION_ENDPOINTS = [e for e in ENDPOINTS if e.kind == COLLECTION]


def send(client, endpoint: Endpoint, url: str, body):
    data = json.dumps(body) if body is not None else None
    kwargs = {"content_type": "application/json"} if data is not None else {}
    return client.generic(endpoint.method, url, data or "", **kwargs)


def key_client(kind: str, org: Organization) -> KeyClient:
    if kind == "agent":
        return KeyClient(make_key(org, make_agent(org, "agent-intruder")))
    return KeyClient(make_key(org))


def strings_in(value) -> set[str]:
    """Every string (keys and values) of a decoded JSON document."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        found = set(value)
        for v in value.values():
            found |= strings_in(v)
        return found
    if isinstance(value, list):
        found = set()
        for v in value:
            found |= strings_in(v)
        return found
    return set()


def markers_of(org: Organization, kwargs: dict) -> set[str]:
    markers = {v for v in kwargs.values() if isinstance(v, str)}
    markers |= set(org.agents.values_list("handle", flat=True))
    markers |= set(org.teams.values_list("name", flat=True))
    markers |= {org.slug}
    return markers


def unauthenticated(endpoint: Endpoint, code: str) -> str:
    """The code of a call without valid credentials: a signed endpoint's own."""
    return "invalid_signature" if endpoint.auth == SIGNATURE else code


@pytest.fixture
def theirs(db):
    return make_org("theirs-org", name="Theirs Incorporated")


@pytest.fixture
def mine(db):
    return make_org("mine-org", name="Mine Limited")


def test_the_table_is_not_empty():
    assert any(e.path.startswith("/api/roster") for e in ENDPOINTS)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.id)
def test_without_credentials_it_is_401(endpoint, theirs, anon_client):
    url, body, _ = endpoint.prepare(theirs)
    response = send(anon_client, endpoint, url, body)
    assert response.status_code == 401, response.content
    assert response.json()["code"] == unauthenticated(endpoint, "authentication_required")


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.id)
def test_with_a_bad_or_revoked_key_it_is_401(endpoint, theirs):
    from organization.models import ApiKey
    from organization.services import api_key_revoke

    url, body, _ = endpoint.prepare(theirs)
    bad = send(KeyClient("ao_000000000000_not-a-real-secret"), endpoint, url, body)
    assert bad.status_code == 401, bad.content
    assert bad.json()["code"] == unauthenticated(endpoint, "authentication_failed")

    plaintext = make_key(theirs)
    api_key_revoke(key=ApiKey.objects.get(prefix=plaintext.split("_")[1]))
    revoked = send(KeyClient(plaintext), endpoint, url, body)
    assert revoked.status_code == 401, revoked.content
    assert revoked.json()["code"] == unauthenticated(endpoint, "authentication_failed")


@pytest.mark.parametrize("endpoint", OBJECT_ENDPOINTS, ids=lambda e: e.id)
def test_another_organizations_object_is_404(endpoint, theirs, mine):
    url, body, _ = endpoint.prepare(theirs)
    for kind in endpoint.callers:
        response = send(key_client(kind, mine), endpoint, url, body)
        if endpoint.auth == SIGNATURE:  # a key is no signature, of whichever organization
            assert response.status_code == 401, f"{kind} key: {response.content!r}"
            assert response.json()["code"] == "invalid_signature"
            continue
        assert response.status_code == 404, f"{kind} key: {response.content!r}"
        assert response.json()["success"] is False


@pytest.mark.parametrize("endpoint", COLLECTION_ENDPOINTS, ids=lambda e: e.id)
def test_a_collection_never_shows_another_organizations_objects(endpoint, theirs, mine):
    _, _, their_kwargs = endpoint.prepare(theirs)
    url, body, my_kwargs = endpoint.prepare(mine)
    markers = markers_of(theirs, their_kwargs) - markers_of(mine, my_kwargs)
    for kind in endpoint.callers:
        response = send(key_client(kind, mine), endpoint, url, body)
        assert 200 <= response.status_code < 300, f"{kind} key: {response.content!r}"
        leaked = strings_in(response.json()) & markers
        assert not leaked, f"{kind} key sees {sorted(leaked)} of another organization"


# --- coverage: every route under /api/ has a row ---------------------------------------


def _walk(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.callback


def _normalize(route: str) -> str:
    """'api/agents/<str:agent_id>' and '/api/agents/{agent_id}' → '/api/agents/{}'."""
    route = "/" + route.lstrip("^").rstrip("$").lstrip("/")
    return re.sub(r"<[^>]+>|\{[^}]+\}|\(\?P<[^>]+>[^)]*\)", "{}", route)


def _methods_of(callback) -> set[str] | None:
    """The HTTP methods a view implements, or None when it cannot be told (a plain function)."""
    actions = getattr(callback, "actions", None)
    if actions:
        return {m.upper() for m in actions if m not in IGNORED_METHODS}
    view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view_class is None:
        return None
    return {
        m.upper()
        for m in view_class.http_method_names
        if m not in IGNORED_METHODS and hasattr(view_class, m)
    }


def api_routes() -> dict[str, set[str] | None]:
    routes = {}
    for route, callback in _walk(get_resolver().url_patterns):
        path = _normalize(route)
        if not path.startswith("/api/") or path.startswith(EXCLUDED_ROUTES):
            continue
        routes[path] = _methods_of(callback)
    return routes


def test_every_api_route_and_method_is_in_the_table():
    table: dict[str, set[str]] = {}
    for endpoint in ENDPOINTS:
        table.setdefault(_normalize(endpoint.route), set()).add(endpoint.method.upper())
    missing = []
    for path, methods in sorted(api_routes().items()):
        listed = table.get(path, set())
        if methods is None:
            if not listed:
                missing.append(f"{path} (any method)")
            continue
        missing += [f"{method} {path}" for method in sorted(methods - listed)]
    assert not missing, (
        "Endpoints missing from the tenancy table (add them to tests/<app>/endpoints.py): "
        + ", ".join(missing)
    )


def test_the_table_has_no_route_that_does_not_exist():
    routes = api_routes()
    unknown = [e.id for e in ENDPOINTS if _normalize(e.route) not in routes]
    assert not unknown, f"Rows for routes that do not exist: {unknown}"
