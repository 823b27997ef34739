"""LOG_FORMAT=json (issue 39 §2): a JSON object a line, with the trace and span it was written in."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from infrastructure.logs import JsonFormatter

ROOT = Path(__file__).resolve().parents[2]


def record(message: str, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("agent.test", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_line_is_one_json_object_with_the_current_trace_and_span():
    span = NonRecordingSpan(
        SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False, trace_flags=TraceFlags(1))
    )
    with trace.use_span(span):
        line = JsonFormatter().format(record("run %s ended", 7))
    entry = json.loads(line)
    assert (entry["level"], entry["logger"], entry["message"]) == (
        "WARNING",
        "agent.test",
        "run 7 ended",
    )
    assert entry["trace_id"] == f"{0xABC:032x}" and entry["span_id"] == f"{0xDEF:016x}"
    assert entry["time"].endswith("+00:00")


def test_outside_a_span_no_ids_and_an_exception_keeps_its_traceback():
    try:
        raise ValueError("bad")
    except ValueError:
        line = JsonFormatter().format(record("failed", exc_info=sys.exc_info()))
    entry = json.loads(line)
    assert "trace_id" not in entry and "span_id" not in entry
    assert "ValueError: bad" in entry["exception"] and "\n" not in line


def run_logging(log_format: str) -> subprocess.CompletedProcess:
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('agent.test').warning('hello %s', 'there')"
    )
    env = {**os.environ, "LOG_FORMAT": log_format, "DJANGO_SETTINGS_MODULE": "config.settings"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_setting_turns_the_service_logs_into_json_and_refuses_a_format_it_does_not_know():
    done = run_logging("json")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "hello" in line]
    assert json.loads(line)["message"] == "hello there"
    refused = run_logging("xml")
    assert refused.returncode != 0
    assert "LOG_FORMAT='xml': use text or json." in refused.stderr
