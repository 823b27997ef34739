"""The OpenAPI schema: it validates, documents every endpoint with its errors, and the API
keeps it — a schemathesis run (positive mode, bounded examples) finds no 5xx and no
response that breaks it."""

from io import StringIO

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import agent_of
from tests.factories import make_key

EXAMPLES_PER_OPERATION = 25
# DRF's limit/offset pagination ignores bad values rather than answering 400.
PAGINATION_PARAMS = {"limit", "offset"}

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE], max_examples=EXAMPLES_PER_OPERATION, deterministic=True
)


def test_the_schema_validates_without_warnings():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert out.getvalue().startswith("openapi:")


def test_the_schema_and_swagger_ui_are_public(client):
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content


def test_every_operation_documents_its_error_responses():
    undocumented = []
    for path, item in schema.raw_schema["paths"].items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            codes = set(operation.get("responses", {}))
            needed = {"401"}
            if "{" in path:
                needed.add("404")
            filters = [
                p
                for p in operation.get("parameters", [])
                if p.get("in") == "query" and p.get("name") not in PAGINATION_PARAMS
            ]
            if "requestBody" in operation or filters:
                needed.add("400")
            if not needed <= codes:
                undocumented.append(f"{method.upper()} {path}: missing {sorted(needed - codes)}")
    assert not undocumented, "\n".join(undocumented)


@pytest.fixture
def agent_key(demo):
    return make_key(demo, agent_of(demo, "agent-sarah"))


@pytest.fixture
def keep_the_test_connection():
    """A WSGI request ends by closing the database connection, which would end the test's
    transaction; Django's test client avoids it the same way."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_the_api_keeps_its_schema(case, agent_key, keep_the_test_connection):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {agent_key}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
