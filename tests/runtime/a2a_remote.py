"""A remote A2A agent for the tests: the SDK's own server (request handler, in-memory task store,
JSON-RPC and HTTP+JSON routes, card route) on 127.0.0.1 with a scripted executor, plus routes that
misbehave (hang, answer malformed, serve something that is not a card)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tests.organization.mcp.live import LiveServer

CARD_PATH = "/.well-known/agent-card.json"

# What the remote does with a task: given its updater and the message's text.
Script = Callable[[TaskUpdater, str], Awaitable[None]]


async def completes(updater: TaskUpdater, text: str) -> None:
    """Answers with a text artifact and a data part."""
    data = Value()
    data.struct_value.update({"rows": 3, "checked": text.splitlines()[0]})
    await updater.start_work()
    await updater.add_artifact(
        [pb.Part(text=f"Done: {text.splitlines()[0]}"), pb.Part(data=data)], name="report"
    )
    await updater.complete()


async def rejects(updater: TaskUpdater, text: str) -> None:
    await updater.reject(new_text_message("I only take Go work."))


async def fails(updater: TaskUpdater, text: str) -> None:
    await updater.start_work()
    await updater.failed(new_text_message("The build server is down."))


async def asks(updater: TaskUpdater, text: str) -> None:
    """Asks for input, or completes once a comment answered (the message carries comments)."""
    if "Comments on the task" in text:
        await updater.start_work()
        await updater.add_artifact([pb.Part(text="Deployed to eu-west.")])
        await updater.complete()
        return
    await updater.requires_input(new_text_message("Which region should it deploy to?"))


async def never_finishes(updater: TaskUpdater, text: str) -> None:
    """Takes the task and never ends it (the executor returns with the task working)."""
    await updater.start_work()


async def answers_big(updater: TaskUpdater, text: str) -> None:
    await updater.start_work()
    await updater.add_artifact([pb.Part(text="x" * 50_000)])
    await updater.complete()


class ScriptedExecutor(AgentExecutor):
    def __init__(self, script: Script):
        self.script = script
        self.received: list[str] = []
        self.headers: list[dict] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.received.append(text)
        self.headers.append(context.call_context.state.get("headers", {}))
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        await self.script(TaskUpdater(event_queue, task.id, task.context_id), text)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def card_for(base: str, name: str = "Gopher") -> pb.AgentCard:
    return pb.AgentCard(
        name=name,
        description="A remote agent for the tests.",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(
                url=f"{base}/rpc", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            pb.AgentInterface(
                url=f"{base}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        capabilities=pb.AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            pb.AgentSkill(id="go", name="Go", description="Go services", tags=["go"]),
            pb.AgentSkill(id="grpc", name="gRPC", description="gRPC APIs", tags=["grpc"]),
        ],
    )


async def _hang(request):
    await asyncio.sleep(2.5)  # past the test's 1 s timeout
    return PlainTextResponse("too late")


async def _malformed(request):
    return PlainTextResponse("<html>Service Unavailable</html>", status_code=200)


async def _not_a_card(request):
    return JSONResponse({"status": "ok", "version": "2.1"})


class _Late:
    """The ASGI app of a server whose routes need its own address (known once it is bound)."""

    def __init__(self, remote):
        self.remote = remote

    async def __call__(self, scope, receive, send):
        await self.remote.app(scope, receive, send)


class RemoteAgent:
    """`with RemoteAgent(script) as remote:` serves an A2A agent at `remote.url`; its card at
    `remote.card_url`. `binding` is the one its card offers first."""

    def __init__(self, script: Script = completes, *, rpc: str = "sdk"):
        self.executor = ScriptedExecutor(script)
        self.server = LiveServer(app=_Late(self), lifespan="off")
        self.url = self.server.url
        self.card_url = f"{self.url}{CARD_PATH}"
        card = card_for(self.url)
        handler = DefaultRequestHandler(
            agent_executor=self.executor, task_store=InMemoryTaskStore(), agent_card=card
        )
        misbehaving = {"hang": _hang, "malformed": _malformed}
        rpc_routes = (
            create_jsonrpc_routes(handler, "/rpc")
            if rpc == "sdk"
            else [Route("/rpc", misbehaving[rpc], methods=["POST"])]
        )
        self.app = Starlette(
            routes=[
                *create_agent_card_routes(card),
                *rpc_routes,
                *create_rest_routes(handler, path_prefix="/rest"),
                Route("/health", _not_a_card),
            ]
        )

    def __enter__(self) -> RemoteAgent:
        self.server.__enter__()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)
