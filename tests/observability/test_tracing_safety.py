"""What the spans must never carry, whatever the operator turns on: the API keys of the requests
we serve and send (Authorization, x-api-key) even with every header captured, and, without
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, a tool's arguments quoted by its refusal."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .otlp import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]
SECRET = "ao_probe_s3cr3tvalue"

# A request Django serves, one each client library sends (the model SDKs' httpx2, httpx), a
# refused tool call whose refusal quotes its argument, a tool call naming an id past a bigint.
PROBE = f"""
import sys
import config.wsgi
import httpx, httpx2
from django.test import Client
from opentelemetry import trace
from infrastructure import tracing
from infrastructure.errors import Invalid

url = sys.argv[1]
keys = {{"Authorization": "Bearer {SECRET}", "X-Api-Key": "{SECRET}", "Cookie": "s={SECRET}"}}
Client(SERVER_NAME="localhost").get("/no-such-page/", headers=keys)
httpx2.get(url, headers=keys)
httpx.get(url, headers=keys)
try:
    with tracing.execute_tool("create_task", call_id="c1", arguments={{"title": "Secret plan"}}):
        raise Invalid("title: 'Secret plan' is not of type 'integer'")
except Invalid:
    pass
with tracing.execute_tool("get_task", call_id="c2", arguments={{"task_id": 10**20}}):
    pass
trace.get_tracer_provider().force_flush()
"""


def probe(otlp: OtlpReceiver, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update(
        env,
        DJANGO_SETTINGS_MODULE="config.settings",
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint,
        # Every header of every request captured, as an operator may ask for.
        OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST=".*",
        OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST=".*",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, otlp.endpoint + "/elsewhere"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def one(spans, name: str):
    (found,) = [s for s in spans if s.name == name]
    return found


@pytest.fixture(scope="module")
def exported():
    """The probe's spans and its stderr."""
    with OtlpReceiver() as otlp:
        done = probe(otlp, OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS="x-mine")
        return list(otlp.spans), done.stderr


def test_keys_are_redacted_from_captured_headers_served_and_sent(exported):
    spans, _ = exported
    server = [s for s in spans if s.kind == "SPAN_KIND_SERVER"]
    clients = [s for s in spans if s.kind == "SPAN_KIND_CLIENT" and s.name == "GET"]
    assert len(server) == 1 and len(clients) == 2, [(s.name, s.kind) for s in spans]
    for span in [*server, *clients]:
        headers = {k: v for k, v in span.attributes.items() if ".header." in k}
        assert headers["http.request.header.authorization"] == ["[REDACTED]"], headers
        assert headers["http.request.header.x_api_key"] == ["[REDACTED]"], headers
        assert SECRET not in repr(headers)


def test_a_refusal_without_content_capture_keeps_the_arguments_it_quotes_to_itself(exported):
    spans, _ = exported
    refused = one(spans, "execute_tool create_task")
    assert refused["error.type"] == "invalid"
    assert "Secret plan" not in repr(refused.attributes) + refused.status_message


def test_an_id_no_task_can_have_is_no_agent_org_task(exported):
    spans, stderr = exported
    # Nor an attribute the exporter fails to encode (and logs a traceback of).
    assert "agent_org.task" not in one(spans, "execute_tool get_task").attributes
    assert "Failed to encode" not in stderr
