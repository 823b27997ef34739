"""OpenTelemetry traces over OTLP/HTTP (docs/observability.md), and the spans of our own.

`setup()` runs once per process (web start, Celery worker start) and does something only when
OTEL_EXPORTER_OTLP_ENDPOINT is set: the SDK, its exporter and the maintained instrumentations
(Django, Celery, psycopg, Redis, httpx2). Unset, nothing is set up and each helper below is one
flag check. Our spans follow the GenAI semantic conventions of `SEMCONV_VERSION`, and each
carries `agent_org.organization`, `agent_org.agent` and `agent_org.task` when they are known.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode

# The revision of the semantic conventions our span names and attributes follow.
SEMCONV_VERSION = "1.44.0"
SERVICE_NAME = "agent-org"
# Headers never recorded, whatever OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_* capture: the keys of
# the requests we serve and of those we send (bearer keys, x-api-key, cookies), as regexes.
SECRET_HEADERS = ("authorization", "cookie", "api.?key")
SANITIZE_FIELDS = "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS"
ORGANIZATION, AGENT, TASK, REFUSAL = (
    "agent_org.organization",
    "agent_org.agent",
    "agent_org.task",
    "agent_org.refusal",
)

_tracer = trace.get_tracer(
    "agent_org", schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
)
_enabled = False
_capture_content = False
_lock = threading.Lock()
# The agent_org.* attributes of the enclosing span of ours, inherited by the spans inside it.
_ours: contextvars.ContextVar[Mapping] = contextvars.ContextVar(
    "agent_org_trace_scope", default=MappingProxyType({})
)


def enabled() -> bool:
    return _enabled


def setup(*, web: bool = False) -> bool:
    """Export traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (the SDK reads its other OTEL_*
    variables); `web` adds Django's instrumentation, which must come before Django loads its
    middleware. Once per process; True when traces are exported."""
    global _enabled, _capture_content
    from django.conf import settings

    if not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        return False
    with _lock:
        if _enabled:
            return True
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.httpx import (
            HTTPX2ClientInstrumentor,
            HTTPXClientInstrumentor,
        )
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from .errors import refused

        given = [f.strip() for f in os.environ.get(SANITIZE_FIELDS, "").split(",") if f.strip()]
        os.environ[SANITIZE_FIELDS] = ",".join([*given, *SECRET_HEADERS])
        # OTEL_SERVICE_NAME, when set, names the service; else it is ours, not "unknown_service".
        named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        provider = TracerProvider(resource=Resource.create(named))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        if web:
            from opentelemetry.instrumentation.django import DjangoInstrumentor

            DjangoInstrumentor().instrument()
        CeleryInstrumentor().instrument()
        PsycopgInstrumentor().instrument(enable_commenter=False)
        RedisInstrumentor().instrument()
        HTTPX2ClientInstrumentor().instrument()  # the model providers' SDKs
        HTTPXClientInstrumentor().instrument()  # remote A2A agents, webhooks
        refused.connect(_mark_refusal, dispatch_uid="trace-refusals")
        _capture_content = settings.OTEL_CAPTURE_MESSAGE_CONTENT
        _enabled = True
    return True


def _mark_refusal(sender, error, **where) -> None:
    """A door refused a move: the span it was refused in says by which rule."""
    trace.get_current_span().set_attribute(REFUSAL, error.code)


# --- context across processes and threads -------------------------------------------


def carrier() -> dict:
    """The current trace context as headers (`traceparent`), to store with work sent later."""
    if not _enabled:
        return {}
    headers: dict = {}
    propagate.inject(headers)
    return headers


@contextlib.contextmanager
def restored(headers: dict | None) -> Iterator[None]:
    """Run the block in the trace context `carrier()` stored (none stored: as it is)."""
    if not _enabled or not headers:
        yield
        return
    token = otel_context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        otel_context.detach(token)


def in_context(fn: Callable) -> Callable:
    """`fn`, run in this thread's current trace context wherever it is called (a pool thread)."""
    if not _enabled:
        return fn
    current, ours = otel_context.get_current(), _ours.get()

    @functools.wraps(fn)
    def run(*args, **kwargs):
        token, scope = otel_context.attach(current), _ours.set(ours)
        try:
            return fn(*args, **kwargs)
        finally:
            _ours.reset(scope)
            otel_context.detach(token)

    return run


# --- our spans ----------------------------------------------------------------------


class Span:
    """What a block may add to its span once it knows more; does nothing when tracing is off."""

    def __init__(self, span: trace.Span | None = None):
        self.span = span

    def set(self, attributes: dict) -> None:
        if self.span is not None:
            self.span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def answered(self, reply) -> None:
        """A model call's reply: the model that answered, its usage and why it stopped."""
        if self.span is None:
            return
        self.set(
            {
                "gen_ai.response.model": reply.model or None,
                "gen_ai.usage.input_tokens": reply.prompt_tokens,
                "gen_ai.usage.output_tokens": reply.completion_tokens,
                "gen_ai.response.finish_reasons": [str(reply.stop_reason)],
            }
        )
        if _capture_content:
            self.span.set_attribute("gen_ai.output.messages", _messages_json([reply], "assistant"))

    def tool_result(self, result: Any) -> Any:
        """A tool call's result, returned as it is: the task it made, when it made one."""
        if self.span is None:
            return result
        if isinstance(result, dict) and {"id", "title", "status"} <= result.keys():
            if TASK not in _ours.get():
                self.span.set_attribute(TASK, result["id"])
        if _capture_content:
            self.span.set_attribute("gen_ai.tool.call.result", _json(result))
        return result


_OFF = Span()


def _scope(organization=None, agent=None, task=None) -> dict:
    """agent_org.* attributes: the organization's slug, the agent's id (its handle), the task's
    id; each may be given as the object or as the value itself."""
    if organization is None and agent is not None and ORGANIZATION not in _ours.get():
        organization = agent.organization  # an agent of the organization (a model instance)
    values = {
        ORGANIZATION: getattr(organization, "slug", organization),
        AGENT: getattr(agent, "handle", agent),
        TASK: getattr(task, "pk", task),
    }
    return {name: value for name, value in values.items() if value is not None}


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: dict | None = None,
    organization=None,
    agent=None,
    task=None,
) -> Iterator[Span]:
    """A span of ours, current for the block, with the agent_org.* attributes of the enclosing
    span of ours and these. A refusal (a DomainError) ends it as an error of the rule's code."""
    if not _enabled:
        yield _OFF
        return
    from .errors import DomainError

    ours = {**_ours.get(), **_scope(organization, agent, task)}
    scope = _ours.set(ours)
    try:
        with _tracer.start_as_current_span(
            name,
            kind=kind,
            attributes={**{k: v for k, v in (attributes or {}).items() if v is not None}, **ours},
            record_exception=False,
            set_status_on_exception=False,
        ) as current:
            try:
                yield Span(current)
            except DomainError as exc:
                current.set_attribute("error.type", exc.code)
                # Its words may quote the arguments (a bad param's value): contents.
                current.set_status(StatusCode.ERROR, exc.message if _capture_content else None)
                raise
            except BaseException as exc:
                current.record_exception(exc)
                current.set_attribute("error.type", type(exc).__qualname__)
                current.set_status(StatusCode.ERROR, str(exc)[:500])
                raise
    finally:
        _ours.reset(scope)


def tag(*, organization=None, agent=None, task=None) -> None:
    """Add agent_org.* attributes to the current span (one a library made: the MCP server's),
    and to the spans of ours inside it."""
    if not _enabled:
        return
    attributes = _scope(organization, agent, task)
    trace.get_current_span().set_attributes(attributes)
    _ours.set({**_ours.get(), **attributes})


def invoke_agent(
    agent=None,
    *,
    name: str | None = None,
    agent_id: str | None = None,
    task=None,
    provider: str | None = None,
    remote: bool = False,
):
    """`invoke_agent {gen_ai.agent.name}`: one agent's turn at work (a managed run, a session's
    specialist; a client span for a `remote` agent); `name` and `agent_id` for one that is no
    agent of the organization."""
    if not _enabled:
        return contextlib.nullcontext(_OFF)
    name = name or agent.name
    return span(
        f"invoke_agent {name}",
        kind=SpanKind.CLIENT if remote else SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": agent_id or agent.handle,
            "gen_ai.provider.name": provider or None,
        },
        agent=agent,
        task=task,
    )


def invoke_workflow(session):
    """`invoke_workflow {gen_ai.workflow.name}`: a collaboration session (its mode names the
    workflow), several agents on one piece of work."""
    if not _enabled:
        return contextlib.nullcontext(_OFF)
    return span(
        f"invoke_workflow {session.mode}",
        attributes={
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": str(session.mode),
            "gen_ai.conversation.id": str(session.pk),
        },
        organization=session.organization,
    )


def chat(provider: str, request):
    """`chat {gen_ai.request.model}`: one model call; `.answered(reply)` adds what came back."""
    if not _enabled:
        return contextlib.nullcontext(_OFF)
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": request.model or None,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.temperature": request.temperature,
    }
    if _capture_content:
        attributes["gen_ai.system_instructions"] = json.dumps(
            [{"type": "text", "content": request.system}], ensure_ascii=False
        )
        attributes["gen_ai.input.messages"] = _messages_json(request.conversation())
    return span(f"chat {request.model}", kind=SpanKind.CLIENT, attributes=attributes)


def execute_tool(
    name: str,
    *,
    call_id: str | None = None,
    arguments=None,
    organization=None,
    agent=None,
    task=None,
):
    """`execute_tool {gen_ai.tool.name}`: one tool call, from a model, call-tool or MCP; its
    task is the `task_id` of its arguments unless given."""
    if not _enabled:
        return contextlib.nullcontext(_OFF)
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": None if call_id is None else str(call_id),
    }
    if _capture_content and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _json(arguments)
    if task is None and isinstance(arguments, dict):
        from .inputs import parse_id

        given = arguments.get("task_id")  # unchecked yet: only an id a task could have
        task = parse_id(given) if isinstance(given, int) else None
    return span(
        f"execute_tool {name}",
        attributes=attributes,
        organization=organization,
        agent=agent,
        task=task,
    )


def server(name: str, attributes: dict, *, headers: dict | None = None, **ours):
    """A server span of a protocol we serve (A2A), continuing the caller's trace from
    `headers` (`traceparent`) when it sends one; `ours`: organization, agent, task."""
    if not _enabled:
        return contextlib.nullcontext(_OFF)
    parent = propagate.extract(headers) if headers else None
    return _server_span(name, attributes, parent, ours)


@contextlib.contextmanager
def _server_span(name: str, attributes: dict, parent, ours: dict) -> Iterator[Span]:
    token = otel_context.attach(parent) if parent is not None else None
    try:
        with span(name, kind=SpanKind.SERVER, attributes=attributes, **ours) as current:
            yield current
    finally:
        if token is not None:
            otel_context.detach(token)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _messages_json(messages, role: str | None = None) -> str:
    """Messages (or replies) in the conventions' shape: role and parts (text, tool calls)."""
    shaped = []
    for message in messages:
        parts = [{"type": "text", "content": message.text if role else message.content}]
        for call in message.tool_calls:
            parts.append(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        if getattr(message, "tool_call_id", ""):
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            ]
        shaped.append({"role": role or str(message.role), "parts": parts})
    return _json(shaped)
