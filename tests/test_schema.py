"""The OpenAPI schema: it validates, documents every endpoint with its errors, and the API
keeps it — a schemathesis run (positive mode, bounded examples) finds no 5xx and no
response that breaks it."""

import os
from io import StringIO

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import agent_of
from tests.factories import make_key

# Examples drawn per operation: 25 (and 10 poisoned) in `make test`, after schemathesis's
# coverage phase (boundary values of every parameter, generated at collection). `make test-fast`
# draws fewer (TEST_FUZZ_EXAMPLES) and skips the coverage phase (TEST_FUZZ_COVERAGE=0) to keep
# the loop short; every operation is still called.
EXAMPLES_PER_OPERATION = int(os.environ.get("TEST_FUZZ_EXAMPLES", "25"))
POISONED_EXAMPLES_PER_OPERATION = max(1, EXAMPLES_PER_OPERATION * 2 // 5)
COVERAGE_PHASE = os.environ.get("TEST_FUZZ_COVERAGE", "1") != "0"

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE], max_examples=EXAMPLES_PER_OPERATION, deterministic=True
)
schema.config.phases.coverage.enabled = COVERAGE_PHASE


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
            # The throttle answers any operation 429; a body over the limit is 413.
            needed = {"401", "429"}
            if "{" in path:
                needed.add("404")
            # Every query parameter can be refused with 400, `limit` and `offset` included.
            filters = [p for p in operation.get("parameters", []) if p.get("in") == "query"]
            if "requestBody" in operation or filters:
                needed.add("400")
            if "requestBody" in operation:
                needed.add("413")
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


# --- issue 8: bad strings through every operation, with both key kinds -------------------

# Inserted into one string of each case: PostgreSQL refuses NUL and psycopg cannot encode a
# lone surrogate, so each would be a 500 wherever one reached the database unguarded.
POISONS = ["\x00", "a\x00b", "\ud800", "x\udfff", "\x00\ud83d"]


def string_slots(case) -> list[tuple[object, object, bool]]:
    """(container, key, in_body) for every string of the case's path, query and body."""
    slots = []
    for container in (case.path_parameters, case.query):
        for key, value in (container or {}).items():
            if isinstance(value, str):
                slots.append((container, key, False))
    stack = [case.body] if isinstance(case.body, dict | list) else []
    while stack:
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, value in pairs:
            if isinstance(value, str):
                slots.append((item, key, True))
            elif isinstance(value, dict | list):
                stack.append(value)
        if isinstance(item, dict):
            slots.extend((item, key, True) for key in [k for k in item if isinstance(k, str)][:1])
    return slots


def poison_one_string(case, poison: str, choice: int) -> None:
    slots = string_slots(case)
    if not slots:
        return
    container, key, in_body = slots[choice % len(slots)]
    if not (in_body and "json" in (case.media_type or "")):
        # URLs and forms carry UTF-8: a lone surrogate cannot even be sent there, a NUL can.
        poison = poison.replace("\ud800", "").replace("\udfff", "").replace("\ud83d", "")
        poison = poison or "\x00"
    if in_body and isinstance(container, dict) and not isinstance(container[key], str):
        container[f"{key}{poison}"] = container.pop(key)  # a poisoned key
    else:
        value = container[key]
        container[key] = value[: len(value) // 2] + poison + value[len(value) // 2 :]


@pytest.fixture(params=["agent key", "organization key"])
def any_key(request, demo):
    agent = agent_of(demo, "agent-sarah") if request.param == "agent key" else None
    return make_key(demo, agent)


@pytest.mark.django_db
@schema.parametrize()
@schema.given(poison=st.sampled_from(POISONS), choice=st.integers(min_value=0, max_value=999))
@settings(
    deadline=None,
    database=None,
    max_examples=POISONED_EXAMPLES_PER_OPERATION,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_bad_strings_never_cause_a_server_error(
    case, poison, choice, any_key, keep_the_test_connection
):
    poison_one_string(case, poison, choice)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {any_key}"}, checks=[not_a_server_error]
    )


# --- what a generated client is typed from ------------------------------------------------


def test_no_query_parameter_is_a_float():
    """Every numeric filter is a database id: `integer`, or a generated client sends 3.0."""
    floats = [
        f"{method.upper()} {path} ?{p['name']}"
        for path, item in schema.raw_schema["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict)
        for p in operation.get("parameters", [])
        if p.get("in") == "query" and p.get("schema", {}).get("type") == "number"
    ]
    assert floats == []
    usage = schema.raw_schema["paths"]["/api/usage"]["get"]["parameters"]
    assert {p["name"]: p["schema"]["type"] for p in usage if p["name"] in ("run", "task")} == {
        "run": "integer",
        "task": "integer",
    }


def test_call_tool_documents_its_result_and_every_status_it_answers():
    responses = schema.raw_schema["paths"]["/api/agent-engine/call-tool"]["post"]["responses"]
    codes = "200 400 401 403 404 409 413 415 422 429 503"
    assert set(responses) == set(codes.split())
    result = responses["200"]["content"]["application/json"]["schema"]
    assert result["type"] == "object"
    for code in set(responses) - {"200"}:
        error = responses[code]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/Error"}, code
    assert "capacity_exceeded" in responses["409"]["description"]


def test_marking_the_inbox_read_documents_its_answer():
    answer = schema.raw_schema["paths"]["/api/inbox/read"]["post"]["responses"]["200"]
    ref = answer["content"]["application/json"]["schema"]["$ref"]
    marked = schema.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert marked["properties"] == {
        "success": {"type": "boolean"},
        "marked": {"type": "integer", "description": "How many items this call marked read."},
    }
    assert sorted(marked["required"]) == ["marked", "success"]


def test_every_operation_documents_503_for_the_database_away():
    missing = [
        f"{method.upper()} {path}"
        for path, item in schema.raw_schema["paths"].items()
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"} and path.startswith("/api/")
        if "503" not in operation["responses"]
    ]
    assert missing == []
