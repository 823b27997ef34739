"""Tracing is set up by the web and worker start-ups only when OTEL_EXPORTER_OTLP_ENDPOINT is set;
unset, nothing is: no SDK imported, no instrumentation, and our spans are no-ops."""

import json
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry import trace

from infrastructure import tracing

from .otlp import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]

# What a web process (config.asgi) and a worker (Celery's worker_init) set up, as JSON.
PROBE = """
import json, sys
import config.asgi
from celery import signals
from config.celery import app
signals.worker_init.send(sender=None)
signals.worker_process_init.send(sender=None)
import psycopg, redis
from django.conf import settings
from opentelemetry import trace
from infrastructure import tracing
with tracing.invoke_agent(name="Lena", agent_id="agent-lena") as span:
    carried = tracing.carrier()
print(json.dumps({
    "enabled": tracing.enabled(),
    "provider": type(trace.get_tracer_provider()).__name__,
    "sdk_imported": "opentelemetry.sdk" in sys.modules,
    "django_middleware": any("opentelemetry" in m for m in settings.MIDDLEWARE),
    "psycopg_wrapped": hasattr(psycopg.connect, "__wrapped__"),
    "redis_wrapped": hasattr(redis.Redis.execute_command, "__wrapped__"),
    "span_recording": span.span is not None,
    "carried": sorted(carried),
}))
"""


def probe(**env) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update(env, DJANGO_SETTINGS_MODULE="config.settings")
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_an_endpoint_the_web_and_worker_start_ups_set_nothing_up():
    assert probe() == {
        "enabled": False,
        "provider": "ProxyTracerProvider",
        "sdk_imported": False,
        "django_middleware": False,
        "psycopg_wrapped": False,
        "redis_wrapped": False,
        "span_recording": False,
        "carried": [],
    }


def test_with_an_endpoint_they_export_and_instrument_django_celery_the_database_and_redis():
    # Nothing listens there: spans are dropped, the process goes on.
    assert probe(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9") == {
        "enabled": True,
        "provider": "TracerProvider",
        "sdk_imported": True,
        "django_middleware": True,
        "psycopg_wrapped": True,
        "redis_wrapped": True,
        "span_recording": True,
        "carried": ["traceparent"],
    }


def test_in_this_process_tracing_is_off_and_the_helpers_cost_a_flag_check():
    assert not tracing.enabled()
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    assert tracing.carrier() == {}
    with tracing.execute_tool("get_task", call_id="c1", arguments={"task_id": 1}) as span:
        assert span is tracing._OFF
        assert span.tool_result({"id": 1}) == {"id": 1}
    with tracing.restored({"traceparent": f"00-{'1' * 32}-{'2' * 16}-01"}):
        assert not trace.get_current_span().get_span_context().is_valid


# One model call (the offline provider) and one tool call, exported at once.
CONTENT_PROBE = """
import django
django.setup()
from infrastructure import tracing
tracing.setup()
from opentelemetry import trace
from collaboration import providers
from collaboration.providers import LLMRequest
request = LLMRequest(system="Be brief.", prompt="Say hello to Lena", model="offline")
providers.complete("offline", request)
with tracing.execute_tool("get_task", call_id="call_1", arguments={"task_id": 7}) as span:
    span.tool_result({"id": 7, "title": "Ship it", "status": "assigned"})
trace.get_tracer_provider().force_flush()
"""


def exported_by_probe(**env) -> dict:
    """The spans the probe exported to a fake collector, by name."""
    with OtlpReceiver() as otlp:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        environ.update(
            env, DJANGO_SETTINGS_MODULE="config.settings", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.endpoint
        )
        done = subprocess.run(
            [sys.executable, "-c", CONTENT_PROBE],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return {s.name: s for s in otlp.spans}


CONTENT = {
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def test_message_contents_go_on_the_spans_only_when_asked_for():
    spans = exported_by_probe()
    chat, tool = spans["chat offline"], spans["execute_tool get_task"]
    assert (chat["gen_ai.provider.name"], chat["gen_ai.response.finish_reasons"]) == (
        "offline",
        ["stop"],
    )
    assert (tool["gen_ai.tool.call.id"], tool["agent_org.task"]) == ("call_1", 7)
    assert not CONTENT & (chat.attributes.keys() | tool.attributes.keys())

    spans = exported_by_probe(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    chat, tool = spans["chat offline"], spans["execute_tool get_task"]
    assert json.loads(chat["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(chat["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Say hello to Lena"}]}
    ]
    (answer,) = json.loads(chat["gen_ai.output.messages"])
    assert answer["role"] == "assistant" and answer["parts"][0]["content"]
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"task_id": 7}
    assert json.loads(tool["gen_ai.tool.call.result"])["title"] == "Ship it"
