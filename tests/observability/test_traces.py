"""One trace (issue 39 §1): an MCP call creates a task for a managed agent, whose run delegates
it to another managed agent, whose run completes it — one trace id from the MCP request (the
client's `params._meta.traceparent`) through both Celery runs, their model calls and tool calls,
exported over OTLP/HTTP to a fake collector on 127.0.0.1.

The web server (`python -m config.serve`) and the Celery worker (`celery worker -B`) are real
processes started with OTEL_EXPORTER_OTLP_ENDPOINT, so their own start-up sets tracing up. The web
server publishes to a broker that is away: its message waits in the outbox with its trace context
and the worker's relay sends it, so the first run continues the request's trace through the
outbox; the second run is sent by the first one's commit hook, in its headers.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from django.conf import settings
from django.db import connection

from infrastructure.models import OutboxMessage
from organization.models import AgentRuntime, TeamRule
from organization.services import agent_card_refresh
from runtime.models import ACTIVE_STATUSES, Run
from runtime.remote_a2a import SEND_TASK
from tasks.models import Task
from tests.collaboration.conftest import fake_llm, specialists, wait_for  # noqa: F401
from tests.collaboration.starts import started
from tests.conftest import requires_postgres
from tests.factories import make_agent, make_key, make_org, make_team
from tests.fake_llm import Reply, ToolUse
from tests.infrastructure.test_broker_outage import relay_every_second  # noqa: F401  (fixture)
from tests.organization.mcp.live import http_client
from tests.runtime.a2a_remote import RemoteAgent, completes
from tests.runtime.scripts import managed_by, script
from tests.tasks.test_sweep import database_url, needs_redis, stop_process

from .otlp import OtlpReceiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, needs_redis]

ROOT = Path(__file__).resolve().parents[2]
TITLE = "Ship the release notes"
# The MCP client's own trace: everything the call causes continues it.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def the_task_id() -> int:
    """The task the MCP call made (read from the fake model's thread, which then lets go of its
    connection)."""
    try:
        return Task.objects.get(title=TITLE).pk
    finally:
        connection.close()


class Cast:
    """Jordan (external, reached over MCP) leads Lena, who leads Alex and Sam (paused); Lena and
    Alex are managed, on the fake model."""

    def __init__(self):
        self.org = make_org("acme")
        TeamRule.objects.create(organization=self.org)
        team = make_team(self.org, "Product")
        self.jordan = make_agent(self.org, "agent-jordan", team=team)
        self.lena = make_agent(
            self.org, "agent-lena", team=team, senior=self.jordan, runtime=AgentRuntime.MANAGED
        )
        report = {"team": team, "senior": self.lena, "runtime": AgentRuntime.MANAGED}
        self.alex = make_agent(self.org, "agent-alex", **report)
        self.sam = make_agent(self.org, "agent-sam", is_paused=True, **report)
        managed_by(self.lena, model="fake-model")
        managed_by(self.alex, model="fake-model")


def start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture
def services(fake_llm, relay_every_second, tmp_path):  # noqa: F811
    """A fake collector, then the web server and a `celery worker -B`, both exporting to it."""
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    with OtlpReceiver() as otlp:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "LOG_FORMAT": "json",
            "LLM_PROVIDER": "openai",
            "LLM_MODEL": "fake-model",
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",  # the remote A2A agent is on 127.0.0.1
        }
        env.pop("TEST_DATABASE_NAME", None)
        port = free_port()
        # The web server's broker is away (nothing listens there): its work waits in the outbox.
        web_env = {**env, "CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
        processes = [
            start(
                [sys.executable, "-m", "config.serve", "--workers", "1", "--port", str(port)],
                web_env,
                tmp_path / "web.log",
            ),
            start(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "-B", "--pidfile", ""]
                + "-P threads -c 2 -l info --without-gossip --without-mingle".split()
                + ["--schedule", str(tmp_path / "beat-schedule")],
                env,
                tmp_path / "worker.log",
            ),
        ]
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: answers(url + "/healthz"), timeout=60, interval=0.2)
            wait_for(lambda: "ready." in (tmp_path / "worker.log").read_text(), timeout=60)
            yield url, otlp, tmp_path
        finally:
            for process in processes:
                stop_process(process)


def answers(url: str) -> bool:
    """The server answers (503 here: /healthz finds its broker away, as it is meant to be)."""
    try:
        return httpx2.get(url, timeout=5).status_code in (200, 503)
    except httpx2.HTTPError:
        return False


async def create_task(url: str, key: str, agent_id: str = "agent-lena") -> dict:
    meta = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
    async with http_client(url, key, read_timeout_seconds=60) as client:
        result = await client.call_tool(
            "create_task", {"title": TITLE, "agent_id": agent_id}, meta=meta
        )
    assert result.is_error is False, result.content[0].text
    return json.loads(result.content[0].text)


def one(spans, **where):
    """The one span whose name and attributes are as given (`name=` for the name)."""
    name = where.pop("name", None)
    found = [
        s
        for s in spans
        if (name is None or s.name == name) and all(s.get(k) == v for k, v in where.items())
    ]
    assert len(found) == 1, (name, where, [(s.name, s.attributes) for s in found])
    return found[0]


def named(spans, name: str) -> list:
    return [s for s in spans if s.name == name]


@requires_postgres()
def test_one_trace_from_the_mcp_call_through_both_runs_to_the_last_tool_call(
    services,
    fake_llm,  # noqa: F811
):
    url, otlp, logs = services
    cast = Cast()
    key = make_key(cast.org, cast.jordan)

    def delegate_to(handle):
        return Reply(
            tool_calls=lambda call: [
                ToolUse("delegate_task", {"task_id": the_task_id(), "agent_id": handle})
            ]
        )

    # Lena tries paused Sam (refused: agent_offline), then Alex; Alex starts and completes it.
    script(fake_llm, cast.lena, delegate_to("agent-sam"), delegate_to("agent-alex"), "Alex has it.")
    script(
        fake_llm,
        cast.alex,
        Reply(
            tool_calls=lambda c: [
                ToolUse("update_task_status", {"task_id": the_task_id(), "status": "in_progress"})
            ]
        ),
        Reply(
            tool_calls=lambda c: [
                ToolUse("complete_task", {"task_id": the_task_id(), "result": "Shipped."})
            ]
        ),
        "Done.",
    )

    created = asyncio.run(create_task(url, key))
    task = Task.objects.get(pk=created["id"])
    # The broker was away for the web server: the run's message waits, with the trace.
    waiting = OutboxMessage.objects.filter(task_name="runtime.run_agent").earliest("pk")
    assert waiting.attempts >= 1  # tried once by the web server's commit hook
    assert waiting.trace_context["traceparent"].split("-")[1] == TRACE_ID

    def finished():
        task.refresh_from_db()
        quiet = not Run.objects.filter(status__in=ACTIVE_STATUSES).exists()
        return task.status == "completed" and quiet

    wait_for(finished, timeout=120, interval=0.2)
    assert (task.assignee, task.result) == (cast.alex, "Shipped.")
    lenas_run = Run.objects.filter(agent=cast.lena).earliest("pk")
    alexs_run = Run.objects.get(agent=cast.alex)

    def exported():
        """Every run's Celery span is in (each ends after what it contains)."""
        spans = otlp.spans_of(TRACE_ID)
        runs = named(spans, "run/runtime.run_agent")
        return spans if len(runs) == Run.objects.count() else None

    spans = wait_for(exported, timeout=30, interval=0.2)
    by_id = {s.span_id: s for s in spans}

    # The MCP request: the SDK's server span, a child of the client's, naming the caller.
    request = one(spans, name="tools/call create_task")
    assert (request.kind, request.parent_id, request.service) == (
        "SPAN_KIND_SERVER",
        CLIENT_SPAN,
        "agent-org",
    )
    assert request["mcp.method.name"] == "tools/call"
    assert request["gen_ai.tool.name"] == "create_task"
    assert request["jsonrpc.request.id"]
    assert (request["agent_org.organization"], request["agent_org.agent"]) == (
        "acme",
        "agent-jordan",
    )
    made = one(spans, name="execute_tool create_task")
    assert made.parent_id == request.span_id
    assert made["gen_ai.tool.call.id"] == request["jsonrpc.request.id"]
    assert (made["agent_org.organization"], made["agent_org.agent"], made["agent_org.task"]) == (
        "acme",
        "agent-jordan",
        task.pk,
    )

    # Both runs, each a Celery task span of the worker and an invoke_agent span inside it.
    celery_runs = named(spans, "run/runtime.run_agent")
    assert len(celery_runs) == Run.objects.count() >= 2
    lena = one(spans, name="invoke_agent Lena")
    alex = one(spans, name="invoke_agent Alex")
    for agent_span, handle, run in (
        (lena, "agent-lena", lenas_run),
        (alex, "agent-alex", alexs_run),
    ):
        assert by_id[agent_span.parent_id].name == "run/runtime.run_agent"
        assert agent_span["gen_ai.operation.name"] == "invoke_agent"
        assert agent_span["gen_ai.agent.id"] == handle
        assert agent_span["agent_org.agent"] == handle
        assert agent_span["agent_org.organization"] == "acme"
        assert agent_span["agent_org.task"] == run.task_id == task.pk

    # Their model calls: `chat {model}` with the provider, the usage and why each stopped.
    def within(span, ancestor) -> bool:
        while span.parent_id in by_id:
            span = by_id[span.parent_id]
            if span.span_id == ancestor.span_id:
                return True
        return False

    chats = named(spans, "chat fake-model")
    assert len(chats) == len(fake_llm.calls) == 6
    # (Alex's run continues Lena's trace, under her run: hers are those not under his.)
    assert sum(within(c, alex) for c in chats) == 3
    assert sum(within(c, lena) and not within(c, alex) for c in chats) == 3
    for chat in chats:
        assert chat.kind == "SPAN_KIND_CLIENT"
        assert (chat["gen_ai.operation.name"], chat["gen_ai.provider.name"]) == ("chat", "openai")
        assert chat["gen_ai.request.model"] == "fake-model"
        assert chat["gen_ai.usage.input_tokens"] > 0
        # The fake model counts a reply's words: a reply of tool calls only has none.
        words = chat["gen_ai.usage.output_tokens"]
        assert (chat["gen_ai.response.finish_reasons"], words > 0) in (
            (["tool_calls"], False),
            (["stop"], True),
        )
        assert chat["agent_org.task"] == task.pk
        assert "gen_ai.input.messages" not in chat.attributes  # contents only when asked for
    # …each over HTTP (the httpx2 instrumentation) to the fake model server.
    assert all(
        any(s.parent_id == chat.span_id and s.kind == "SPAN_KIND_CLIENT" for s in spans)
        for chat in chats
    )

    # Their tool calls, with the model's call ids; the refused one says by which rule.
    refused, delegated = sorted(
        named(spans, "execute_tool delegate_task"),
        key=lambda s: "agent_org.refusal" in s.attributes,
    )[::-1]
    assert (refused["agent_org.refusal"], refused["error.type"]) == (
        "agent_offline",
        "agent_offline",
    )
    assert "agent_org.refusal" not in delegated.attributes
    completed = one(spans, name="execute_tool complete_task")
    for tool_span, agent_span in ((refused, lena), (delegated, lena), (completed, alex)):
        assert within(tool_span, agent_span) and (agent_span is alex or not within(tool_span, alex))
        assert tool_span["gen_ai.tool.call.id"].startswith("call_fake_")
        assert tool_span["agent_org.task"] == task.pk
        assert tool_span["agent_org.agent"] == agent_span["agent_org.agent"]
    # Lena's run was sent by the relay in the MCP call's trace; Alex's by her run's commit hook.
    assert within(lena, made) and within(alex, lena)

    # PostgreSQL and Redis calls are in the trace too, and every span of ours names the tenant.
    assert any(s.get("db.system.name", s.get("db.system")) == "postgresql" for s in spans)
    assert any(s.get("db.system.name", s.get("db.system")) == "redis" for s in spans)
    ours = [s for s in spans if s.scope == "agent_org"]
    assert ours and all(s["agent_org.organization"] == "acme" for s in ours)

    # The worker's JSON log lines written inside a span carry its trace and span ids.
    lines = [
        json.loads(line)
        for line in (logs / "worker.log").read_text().splitlines()
        if line.startswith("{")
    ]
    in_trace = [line for line in lines if line.get("trace_id") == TRACE_ID]
    assert in_trace and all(line["span_id"] in by_id for line in in_trace)

    # A REST call-tool continues its caller's trace too: Django's server span, then the tool's;
    # a move the rules refuse says by which rule.
    rest_trace = "0af7651916cd43dd8448eb211c80319c"
    answer = httpx2.post(
        f"{url}/api/agent-engine/call-tool",
        json={"toolName": "create_task", "params": {"title": "Later", "agent_id": "agent-sam"}},
        headers={
            "Authorization": f"Bearer {key}",
            "traceparent": f"00-{rest_trace}-b7ad6b7169203331-01",
        },
        timeout=30,
    )
    assert (answer.status_code, answer.json()["code"]) == (409, "agent_offline")

    def rest_spans():
        spans = otlp.spans_of(rest_trace)
        return spans if any(s.kind == "SPAN_KIND_SERVER" for s in spans) else None

    spans = wait_for(rest_spans, timeout=30, interval=0.2)
    (server,) = [s for s in spans if s.kind == "SPAN_KIND_SERVER"]
    assert (server.scope, server.parent_id) == (
        "opentelemetry.instrumentation.django",
        "b7ad6b7169203331",
    )
    assert server.get("http.response.status_code", server.get("http.status_code")) == 409
    tool = one(spans, name="execute_tool create_task")
    assert tool.parent_id == server.span_id
    assert (tool["agent_org.refusal"], tool["agent_org.agent"]) == ("agent_offline", "agent-jordan")

    # An A2A message is a server span of its own, continuing its caller's trace; the rules
    # refuse this one (Sam is paused): the task answered is REJECTED, the span says by which rule.
    a2a_trace = "5b8aa5a2d2c872e8321cf37308d69df2"
    answer = httpx2.post(
        f"{url}/a2a/acme/agent-sam/",
        headers={
            "Authorization": f"Bearer {key}",
            "A2A-Version": "1.0",
            "traceparent": f"00-{a2a_trace}-00f067aa0ba902b7-01",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Fix it"}]}
            },
        },
        timeout=30,
    )
    rejected = answer.json()["result"]["task"]
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"

    def a2a_spans():
        spans = otlp.spans_of(a2a_trace)
        return spans if named(spans, "a2a SendMessage") else None

    a2a = wait_for(a2a_spans, timeout=30, interval=0.2)
    sent = one(a2a, name="a2a SendMessage")
    assert (sent.kind, sent.parent_id) == ("SPAN_KIND_SERVER", "00f067aa0ba902b7")
    assert (sent["a2a.method.name"], sent["a2a.task.id"], sent["a2a.task.state"]) == (
        "SendMessage",
        rejected["id"],
        "TASK_STATE_REJECTED",
    )
    assert (sent["agent_org.organization"], sent["agent_org.agent"]) == ("acme", "agent-sam")
    assert sent["agent_org.refusal"] == "agent_offline"


@requires_postgres()
def test_a_collaboration_session_is_one_workflow_of_its_specialists(services, fake_llm):  # noqa: F811
    _, otlp, _ = services
    org = make_org("acme")
    session = started(org, specialists("security-reviewer", "perf-reviewer"))

    def finished():
        session.refresh_from_db()
        return session.is_finished

    wait_for(finished, timeout=120, interval=0.2)
    assert session.status == "completed", session.error

    def exported():
        runs = [s for s in otlp.spans if s.name == "run/collaboration.run_session"]
        return otlp.spans_of(runs[0].trace_id) if runs else None

    spans = wait_for(exported, timeout=30, interval=0.2)
    workflow = one(spans, name="invoke_workflow parallel")
    assert workflow["gen_ai.operation.name"] == "invoke_workflow"
    assert workflow["gen_ai.conversation.id"] == str(session.pk)
    assert workflow["agent_org.organization"] == "acme"
    # Each specialist, in the pool's threads, is an agent of the workflow with its model call.
    for name in ("security-reviewer", "perf-reviewer"):
        agent = one(spans, name=f"invoke_agent {name}")
        assert (agent.parent_id, agent["gen_ai.agent.id"]) == (workflow.span_id, name)
        assert agent["agent_org.organization"] == "acme"
        (chat,) = [s for s in spans if s.parent_id == agent.span_id and s.scope == "agent_org"]
        assert chat.name == "chat fake-model" and chat["gen_ai.usage.input_tokens"] > 0


@requires_postgres()
def test_a_remote_a2a_agent_is_invoked_as_a_client_and_told_the_trace(services, settings):
    _, otlp, _ = services
    url = services[0]
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the remote listens on 127.0.0.1
    org = make_org("acme")
    jordan = make_agent(org, "agent-jordan")
    with RemoteAgent(completes) as remote:
        gopher = make_agent(
            org,
            "agent-gopher",
            name="Gopher",
            senior=jordan,
            runtime=AgentRuntime.A2A,
            a2a_card_url=remote.card_url,
        )
        agent_card_refresh(agent=gopher)
        created = asyncio.run(create_task(url, make_key(org, jordan), "agent-gopher"))
        task = Task.objects.get(pk=created["id"])

        def completed():
            task.refresh_from_db()
            return task.status == "completed"

        wait_for(completed, timeout=60, interval=0.2)
        # The remote was told the trace it works in (W3C traceparent, by the httpx instrumentation).
        (headers,) = remote.executor.headers
        assert headers["traceparent"].split("-")[1] == TRACE_ID

    def exported():
        spans = otlp.spans_of(TRACE_ID)
        return spans if named(spans, f"run/{SEND_TASK}") else None

    spans = wait_for(exported, timeout=30, interval=0.2)
    invoked = one(spans, name="invoke_agent Gopher")
    assert invoked.kind == "SPAN_KIND_CLIENT"
    assert (invoked["gen_ai.agent.id"], invoked["agent_org.agent"], invoked["agent_org.task"]) == (
        "agent-gopher",
        "agent-gopher",
        task.pk,
    )
    # Under it, the A2A SDK's client spans and the HTTP requests they made.
    by_id = {s.span_id: s for s in spans}

    def under_invoked(span) -> bool:
        while span.parent_id in by_id:
            span = by_id[span.parent_id]
            if span is invoked:
                return True
        return False

    scopes = {s.scope for s in spans if under_invoked(s) and s.kind == "SPAN_KIND_CLIENT"}
    assert {"a2a-python-sdk", "opentelemetry.instrumentation.httpx"} <= scopes
