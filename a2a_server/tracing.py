"""A2A server spans (docs/observability.md): each method of the request handler as a server span
with `a2a.method.name`, `a2a.task.id` and `a2a.task.state`, continuing the caller's trace."""

from a2a.types import a2a_pb2 as pb

from infrastructure import tracing
from infrastructure.inputs import parse_id


def _span(method: str, context, task_id: str | None = None):
    state = context.state
    return tracing.server(
        f"a2a {method}",
        {"a2a.method.name": method, "a2a.task.id": task_id or None},
        headers=state.get("headers"),
        organization=state["caller"].organization,
        agent=state.get("agent"),
        task=parse_id(task_id),  # the caller's words: only an id a task could have
    )


def _answered(span, task) -> None:
    """The task a method answered: its id and state (the first event of a stream)."""
    if isinstance(task, pb.Task):
        span.set(
            {
                "a2a.task.id": task.id,
                "a2a.task.state": pb.TaskState.Name(task.status.state),
                tracing.TASK: parse_id(task.id),
            }
        )


def traced(handler_class):
    """`handler_class` (the SDK's RequestHandler of ours) with a span around each method; as it
    is when tracing is off."""
    if not tracing.enabled():
        return handler_class

    class Traced(handler_class):
        async def on_message_send(self, params, context):
            with _span("SendMessage", context) as span:
                task = await super().on_message_send(params, context)
                _answered(span, task)
                return task

        async def on_get_task(self, params, context):
            with _span("GetTask", context, params.id) as span:
                task = await super().on_get_task(params, context)
                _answered(span, task)
                return task

        async def on_list_tasks(self, params, context):
            with _span("ListTasks", context):
                return await super().on_list_tasks(params, context)

        async def on_cancel_task(self, params, context):
            with _span("CancelTask", context, params.id) as span:
                task = await super().on_cancel_task(params, context)
                _answered(span, task)
                return task

        async def on_message_send_stream(self, params, context):
            stream = super().on_message_send_stream(params, context)
            async for event in _first_traced(stream, _span("SendStreamingMessage", context)):
                yield event

        async def on_subscribe_to_task(self, params, context):
            stream = super().on_subscribe_to_task(params, context)
            async for event in _first_traced(stream, _span("SubscribeToTask", context, params.id)):
                yield event

    Traced.__name__ = Traced.__qualname__ = f"Traced{handler_class.__name__}"
    return Traced


async def _first_traced(stream, span_of_start):
    """A stream whose span covers its start, up to its first event (the task): the span is
    never held open across the yields of a long stream."""
    with span_of_start as span:
        first = await anext(stream, None)
        _answered(span, first)
    if first is None:
        return
    yield first
    async for event in stream:
        yield event
