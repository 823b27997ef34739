"""Tracing is set up by the web and worker start-ups only when OTEL_EXPORTER_OTLP_ENDPOINT is set;
unset, nothing is: no SDK imported, no instrumentation, and our spans are no-ops."""

import json
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry import trace

from infrastructure import tracing

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
