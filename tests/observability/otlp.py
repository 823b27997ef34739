"""A fake OpenTelemetry collector: a real OTLP/HTTP receiver on 127.0.0.1 that decodes each
`ExportTraceServiceRequest` (protobuf) posted to /v1/traces and keeps its spans.

    with OtlpReceiver() as otlp:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.endpoint
        ...
        otlp.spans_of(trace_id)  # [ReceivedSpan(name, trace_id, span_id, parent_id, kind, ...)]
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str  # SPAN_KIND_SERVER, SPAN_KIND_CLIENT, …
    scope: str  # the instrumentation scope: "agent_org", "mcp-python-sdk", the instrumentations
    service: str
    attributes: dict
    status_message: str = ""  # an error's description

    def __getitem__(self, name: str):
        return self.attributes[name]

    def get(self, name: str, default=None):
        return self.attributes.get(name, default)


def _value(any_value):
    """An OTLP AnyValue as Python."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=SpanMessage.SpanKind.Name(span.kind),
                        scope=scope_spans.scope.name,
                        service=resource.get("service.name", ""),
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        status_message=span.status.message,
                    )
                )
    return spans


class OtlpReceiver:
    def __init__(self):
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                spans = decode(body)
                with receiver.lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans_of(self, trace_id: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
