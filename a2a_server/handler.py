"""The SDK's request handler over the tasks engine: each method runs `work` off the event loop
as the caller the gate authenticated (`context.state`)."""

import asyncio
import functools
import time

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from infrastructure.errors import DomainError, NotFound

from . import conformance, work


def off_the_loop(function):
    """`function` run in a worker thread (its own connection), our errors as A2A's."""

    def run(*args):
        try:
            return function(*args)
        except NotFound as exc:
            raise TaskNotFoundError(exc.message) from exc
        except DomainError as exc:
            raise (
                TaskNotCancelableError(exc.message)
                if exc.status == 409
                else InvalidParamsError(exc.message)
            ) from exc
        finally:
            close_old_connections()

    # Not thread_sensitive: concurrent requests run side by side, as /mcp's tools do.
    return functools.wraps(function)(sync_to_async(run, thread_sensitive=False))


send = off_the_loop(work.send)
get = off_the_loop(work.get)
listed = off_the_loop(work.listed)
cancel = off_the_loop(work.cancel)

# A blocking SendMessage answers once its task is in one of these states, or at its timeout.
SETTLED = {
    pb.TASK_STATE_COMPLETED,
    pb.TASK_STATE_FAILED,
    pb.TASK_STATE_CANCELED,
    pb.TASK_STATE_REJECTED,
    pb.TASK_STATE_INPUT_REQUIRED,
}
# A stream ends with its task in one of these.
TERMINAL = {
    pb.TASK_STATE_COMPLETED,
    pb.TASK_STATE_FAILED,
    pb.TASK_STATE_CANCELED,
    pb.TASK_STATE_REJECTED,
}
POLL_SECONDS = 0.5


async def settled(caller, task: pb.Task) -> pb.Task:
    """`task` read again until it settles or A2A_BLOCKING_TIMEOUT_SECONDS pass."""
    deadline = time.monotonic() + settings.A2A_BLOCKING_TIMEOUT_SECONDS
    while task.status.state not in SETTLED and time.monotonic() < deadline:
        await asyncio.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))
        task = await get(caller, task.id)
    return task


async def following(caller, task: pb.Task):
    """The task, then each change of its state (read again every POLL_SECONDS, so any web
    process serves it), its result artifact before the last: until the task ends."""
    yield task
    state = task.status.state
    while state not in TERMINAL:
        await asyncio.sleep(POLL_SECONDS)
        task = await get(caller, task.id)
        if task.status.state == state:
            continue
        state = task.status.state
        for artifact in task.artifacts:
            yield pb.TaskArtifactUpdateEvent(
                task_id=task.id, context_id=task.context_id, artifact=artifact, last_chunk=True
            )
        yield pb.TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status
        )


class OrganizationRequestHandler(RequestHandler):
    """SendMessage, GetTask, ListTasks, CancelTask, SendStreamingMessage and SubscribeToTask;
    push notification configs unsupported."""

    async def sent(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        """The message as a task (or a comment on one); the conformance agent then plays its
        part on it."""
        work.check_message(params.message)
        caller, agent = context.state["caller"], context.state["agent"]
        task = await send(caller, agent, params.message)
        if context.state.get("conformance") and task.status.state != pb.TASK_STATE_REJECTED:
            message_id = params.message.message_id
            await conformance.play(agent, task.id, message_id)
            task = conformance.dressed(await get(caller, task.id), message_id)
        return task

    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext):
        if context.state.get("conformance") and (reply := conformance.reply_to(params.message)):
            return reply
        caller = context.state["caller"]
        task = await self.sent(params, context)
        if params.configuration.return_immediately:
            return task
        return await settled(caller, task)

    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext):
        length = params.history_length if params.HasField("history_length") else None
        return await get(context.state["caller"], params.id, length)

    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext):
        return await listed(context.state["caller"], context.state["agent"], params)

    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext):
        return await cancel(context.state["caller"], params.id)

    async def on_message_send_stream(self, params: pb.SendMessageRequest, context):
        if context.state.get("conformance") and (reply := conformance.reply_to(params.message)):
            yield reply
            return
        caller = context.state["caller"]
        task = await self.sent(params, context)
        async for event in following(caller, task):
            yield event

    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest, context):
        caller = context.state["caller"]
        task = await get(caller, params.id)
        if task.status.state in TERMINAL:
            raise UnsupportedOperationError(f"Task {task.id} has ended: nothing more to stream.")
        async for event in following(caller, task):
            yield event

    async def on_create_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params, context):
        raise UnsupportedOperationError("No extended card: the public card is the whole card.")
