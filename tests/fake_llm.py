"""A fake LLM provider: a real HTTP server on 127.0.0.1 speaking two wire formats.

- OpenAI chat completions: `POST /v1/chat/completions` (point the `openai` SDK or
  OPENAI_BASE_URL at `fake.openai_base_url`);
- Anthropic messages: `POST /v1/messages` (ANTHROPIC_BASE_URL = `fake.anthropic_base_url`).

The official SDKs run their real HTTP code path against it (no mocking). Usage::

    from tests.fake_llm import FakeLLM, Reply

    with FakeLLM(latency=0.0) as fake:
        fake.on(agent="security", replies=[Reply(status=429), Reply(status=429), Reply("fine")])
        fake.on(purpose="synthesis", replies=[Reply("the synthesis", delay=0.2)])
        fake.on(contains="hang here", replies=[Reply(hang=True)])
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)  # or fake.env()
        ...
        assert len(fake.calls_for(agent="security")) == 3
        assert fake.peak_concurrency <= 3

Matching: `on(...)` scripts are tried in the order they were added; a script matches when all
its given criteria do — `agent` / `purpose` compare with the `X-Collaboration-Agent` /
`X-Collaboration-Purpose` headers our providers send, `contains` is a substring of the system
prompt + messages, `api` is "openai" or "anthropic". Each match consumes the script's next reply;
the last reply repeats. Without a match, `default` answers (text naming the agent, a VERDICT and a
CONFIDENCE line, or a valid JSON plan for a `plan` call).

A `Reply` is `text` (a string, or a callable `(call) -> str`), `status` (non-200 sends the
provider's error body; 429 carries `retry-after-ms: 10` so SDK retries are quick), `delay`
seconds before answering (plus the server's fixed `latency`), `hang` (answer only after
`release()` or when the server stops), token usage (`prompt_tokens`, `completion_tokens`;
default: word counts) and extra `headers`. A client that gives up (timeout) is noticed within
~10 ms: its call is recorded with `answered=False` and stops counting as in flight.

Tool calls: `Reply(tool_calls=[ToolUse("get_organization_roster", {"filter": "all"})])` (or a
callable `(call) -> list[ToolUse]`) answers with tool calls in the wire format of the endpoint
hit — OpenAI `message.tool_calls` (arguments as a JSON string; a `str` arguments is sent as it
is, to script malformed JSON) with `finish_reason: "tool_calls"`, or Anthropic `tool_use` content
blocks with `stop_reason: "tool_use"` — after the reply's text, if it has one (no default text
then). A `ToolUse` without an id gets `call_fake_<n>` / `toolu_fake_<n>`.

Every request is recorded as a `Call` in `fake.calls` (api, agent, purpose, model, system,
prompt, temperature, max_tokens, status, answered, started, ended), with what it offered and
carried in one shape for both formats: `tools` (`[{name, description, input_schema}]`),
`messages` (`[{role, content, tool_calls, tool_call_id, is_error}]`: user, assistant, tool) and
`tool_results` (its `tool` messages); `body` is the raw request.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class ToolUse:
    """A tool call the fake model makes: a name, its arguments (a dict, or a raw string)."""

    name: str
    arguments: dict | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class Reply:
    text: str | Callable[[Call], str] | None = None
    tool_calls: list[ToolUse] | Callable[[Call], list[ToolUse]] | None = None
    status: int = 200
    delay: float = 0.0
    hang: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    headers: dict = field(default_factory=dict)
    # The model the server says answered (default: the one asked for).
    model: str | None = None


@dataclass
class Call:
    api: str
    path: str
    agent: str
    purpose: str
    model: str
    system: str
    prompt: str
    temperature: float | None
    max_tokens: int | None
    body: dict
    started: float
    ended: float | None = None
    status: int | None = None
    answered: bool = False
    tools: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    # The key the SDK presented: its `x-api-key` header, or else its `Authorization`.
    credential: str = ""

    @property
    def text(self) -> str:
        return f"{self.system}\n{self.prompt}"

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    @property
    def tool_results(self) -> list[dict]:
        return [m for m in self.messages if m["role"] == "tool"]


@dataclass
class Script:
    agent: str | None
    purpose: str | None
    contains: str | None
    api: str | None
    replies: list[Reply]
    used: int = 0

    def matches(self, call: Call) -> bool:
        return (
            (self.agent is None or call.agent == self.agent)
            and (self.purpose is None or call.purpose == self.purpose)
            and (self.api is None or call.api == self.api)
            and (self.contains is None or self.contains in call.text)
        )

    def next_reply(self) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply


def default_text(call: Call) -> str:
    if call.purpose == "plan":
        names = re.search(r"The agent names must be taken from (\[.*?\])", call.prompt)
        agents = json.loads(names.group(1)) if names else []
        return json.dumps(
            {
                "plan": "fake plan",
                "assignments": [{"agent": a, "subtask": f"fake subtask for {a}"} for a in agents],
            }
        )
    if call.purpose == "synthesis":
        return "Fake synthesis of the contributions."
    return f"Fake answer from {call.agent or 'an agent'}.\nVERDICT: yes\nCONFIDENCE: 0.8"


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a burst of connections (bench/scale.py opens a
    # thousand at once) would wait for SYN retries of a second and more.
    request_queue_size = 4096


class FakeLLM:
    def __init__(self, latency: float = 0.0, default: Reply | None = None):
        self.latency = latency
        self.default = default or Reply(text=default_text)
        self.calls: list[Call] = []
        self.scripts: list[Script] = []
        self.lock = threading.Lock()
        self.inflight = 0
        self.peak_concurrency = 0
        self._released = threading.Event()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeLLM:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll: stop() waits up to one interval for the loop (0.5 s by default, per test).
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def env(self) -> dict[str, str]:
        """Environment variables that point both SDKs here (with dummy keys)."""
        return {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": "fake-openai-key",
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": "fake-anthropic-key",
        }

    # --- scripting and inspection ---------------------------------------------------------

    def on(
        self,
        *,
        agent: str | None = None,
        purpose: str | None = None,
        contains: str | None = None,
        api: str | None = None,
        replies: list[Reply] | Reply,
    ) -> Script:
        script = Script(
            agent, purpose, contains, api, replies if isinstance(replies, list) else [replies]
        )
        with self.lock:
            self.scripts.append(script)
        return script

    def release(self) -> None:
        """Let every hanging reply go (they answer)."""
        self._released.set()

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.scripts.clear()
            self.peak_concurrency = 0
        self._released.clear()

    def calls_for(
        self,
        *,
        agent: str | None = None,
        purpose: str | None = None,
        answered: bool | None = None,
    ) -> list[Call]:
        with self.lock:
            return [
                c
                for c in self.calls
                if (agent is None or c.agent == agent)
                and (purpose is None or c.purpose == purpose)
                and (answered is None or c.answered == answered)
            ]

    def _reply_for(self, call: Call) -> Reply:
        with self.lock:
            self.calls.append(call)
            self.inflight += 1
            self.peak_concurrency = max(self.peak_concurrency, self.inflight)
            for script in self.scripts:
                if script.matches(call):
                    return script.next_reply()
        return self.default

    def _done(self, call: Call, status: int, answered: bool) -> None:
        with self.lock:
            call.ended = time.monotonic()
            call.status = status
            call.answered = answered
            self.inflight -= 1


def _words(text: str) -> int:
    return len(text.split())


def _message(role: str, content: str = "", **extra) -> dict:
    return {
        "role": role,
        "content": content,
        "tool_calls": [],
        "tool_call_id": "",
        "is_error": False,
        **extra,
    }


def _openai_messages(raw: list[dict]) -> list[dict]:
    """Chat-completion messages (system left out) in the one shape of `Call.messages`."""
    messages = []
    for m in raw:
        role, content = m.get("role"), m.get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        content = content or ""
        if role == "system":
            continue
        if role == "tool":
            messages.append(_message("tool", content, tool_call_id=m.get("tool_call_id", "")))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                raw_arguments = c["function"].get("arguments") or ""
                try:
                    arguments = json.loads(raw_arguments)
                except (json.JSONDecodeError, RecursionError):  # as a real server, keeps the text
                    arguments = raw_arguments
                calls.append({"id": c["id"], "name": c["function"]["name"], "arguments": arguments})
            messages.append(_message("assistant", content, tool_calls=calls))
        else:
            messages.append(_message("user", content))
    return messages


def _anthropic_messages(raw: list[dict]) -> list[dict]:
    """Anthropic messages in the one shape of `Call.messages`: a user message's `tool_result`
    blocks become `tool` messages (before its text, as the API wants them)."""
    messages = []
    for m in raw:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if m.get("role") == "assistant":
            calls = [
                {"id": b["id"], "name": b["name"], "arguments": b.get("input")}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            messages.append(_message("assistant", texts, tool_calls=calls))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                result = b.get("content", "")
                if isinstance(result, list):
                    result = "\n".join(p.get("text", "") for p in result)
                messages.append(
                    _message(
                        "tool",
                        result,
                        tool_call_id=b.get("tool_use_id", ""),
                        is_error=bool(b.get("is_error")),
                    )
                )
        if texts or not any(b.get("type") == "tool_result" for b in blocks):
            messages.append(_message("user", texts))
    return messages


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet
        pass

    def _client_gone(self, timeout: float = 0.0) -> bool:
        """Waits up to `timeout` for the client to hang up (select wakes at once if it does)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], timeout)
            if readable:
                if self.connection.recv(1, socket.MSG_PEEK) == b"":
                    return True
                time.sleep(min(timeout, 0.01))  # unexpected extra bytes: do not spin
        except OSError:
            return True
        return False

    def _wait(self, seconds: float | None) -> bool:
        """Wait (or until released when None); False if the client hung up meanwhile."""
        fake = self.server_fake
        end = None if seconds is None else time.monotonic() + seconds
        while True:
            if end is None:
                if self._client_gone(0.01):
                    return False
                if fake._released.is_set():
                    return True
            else:
                # One wait for the whole latency (select wakes at once if the client hangs up):
                # a thousand calls in flight must not each poll.
                left = end - time.monotonic()
                if left <= 0:
                    return True
                if self._client_gone(left):
                    return False

    def do_POST(self):
        fake = self.server_fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        if self.path.rstrip("/").endswith("/chat/completions"):
            api = "openai"
            raw = body.get("messages") or []
            system = "\n".join(
                str(m.get("content") or "") for m in raw if m.get("role") == "system"
            )
            messages = _openai_messages(raw)
            tools = [
                {
                    "name": t["function"]["name"],
                    "description": t["function"].get("description", ""),
                    "input_schema": t["function"].get("parameters", {}),
                    "strict": t["function"].get("strict", False),
                }
                for t in body.get("tools") or []
            ]
        elif self.path.rstrip("/").endswith("/messages"):
            api = "anthropic"
            system = body.get("system") or ""
            if isinstance(system, list):
                system = "\n".join(b.get("text", "") for b in system)
            messages = _anthropic_messages(body.get("messages") or [])
            tools = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("input_schema", {}),
                }
                for t in body.get("tools") or []
            ]
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        call = Call(
            api=api,
            path=self.path,
            agent=self.headers.get("X-Collaboration-Agent", ""),
            purpose=self.headers.get("X-Collaboration-Purpose", ""),
            credential=self.headers.get("x-api-key") or self.headers.get("Authorization") or "",
            model=body.get("model", ""),
            system=system,
            prompt="\n".join(m["content"] for m in messages if m["content"]),
            temperature=body.get("temperature"),
            max_tokens=body.get("max_tokens"),
            body=body,
            started=time.monotonic(),
            tools=tools,
            messages=messages,
        )
        reply = fake._reply_for(call)
        answered = False
        status = reply.status
        try:
            wait = None if reply.hang else fake.latency + reply.delay
            if not self._wait(wait):
                return
            uses = reply.tool_calls(call) if callable(reply.tool_calls) else reply.tool_calls
            uses = list(uses or [])
            if callable(reply.text):
                text = reply.text(call)
            else:
                text = reply.text or ("" if uses else default_text(call))
            if status != 200:
                self._send_error(api, status, reply)
            else:
                prompt_tokens = (
                    reply.prompt_tokens if reply.prompt_tokens is not None else _words(call.text)
                )
                completion_tokens = (
                    reply.completion_tokens if reply.completion_tokens is not None else _words(text)
                )
                n = next(fake._ids)
                if api == "openai":
                    message = {"role": "assistant", "content": text or None}
                    if uses:
                        message["tool_calls"] = [
                            {
                                "id": use.id or f"call_fake_{n}_{i}",
                                "type": "function",
                                "function": {
                                    "name": use.name,
                                    "arguments": use.arguments
                                    if isinstance(use.arguments, str)
                                    else json.dumps(use.arguments),
                                },
                            }
                            for i, use in enumerate(uses, start=1)
                        ]
                    payload = {
                        "id": f"chatcmpl-fake-{n}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": reply.model or call.model,
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if uses else "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    }
                else:
                    payload = {
                        "id": f"msg_fake_{n}",
                        "type": "message",
                        "role": "assistant",
                        "model": reply.model or call.model,
                        "content": ([{"type": "text", "text": text}] if text or not uses else [])
                        + [
                            {
                                "type": "tool_use",
                                "id": use.id or f"toolu_fake_{n}_{i}",
                                "name": use.name,
                                "input": use.arguments,
                            }
                            for i, use in enumerate(uses, start=1)
                        ],
                        "stop_reason": "tool_use" if uses else "end_turn",
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": prompt_tokens,
                            "output_tokens": completion_tokens,
                        },
                    }
                self._send(200, payload, reply.headers)
            answered = True
        except OSError:
            answered = False
        finally:
            fake._done(call, status, answered)

    def _send_error(self, api: str, status: int, reply: Reply) -> None:
        kind = {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}.get(
            status, "invalid_request_error"
        )
        message = f"fake {kind} ({status})"
        headers = {"retry-after-ms": "10"} if status == 429 else {}
        headers.update(reply.headers)
        if api == "openai":
            body = {"error": {"message": message, "type": kind, "code": None}}
        else:
            body = {"type": "error", "error": {"type": kind, "message": message}}
        self._send(status, body, headers)

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True
