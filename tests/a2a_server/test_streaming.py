"""SendStreamingMessage and SubscribeToTask as SSE, with the SDK's client over both bindings:
the task, then its changes, until it ends."""

import threading
import time
import uuid

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import UnsupportedOperationError

from tasks.models import Task, TaskStatus
from tests.factories import give_tasks, make_agent, make_key, make_org
from tests.organization.mcp.live import run

from .conftest import agent_url, client_for

pytestmark = pytest.mark.django_db(transaction=True)
BINDINGS = ["JSONRPC", "HTTP+JSON"]


def message(text: str) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)]
        )
    )


def move_when(condition, **fields) -> None:
    """Once a task matching `condition` exists (polled with a deadline), update it."""
    deadline = time.monotonic() + 15
    while not Task.objects.filter(**condition).exists():
        assert time.monotonic() < deadline, "no task to move"
        time.sleep(0.05)
    Task.objects.filter(**condition).update(**fields)


def states(events) -> list:
    found = []
    for event in events:
        if event.HasField("task"):
            found.append(event.task.status.state)
        elif event.HasField("status_update"):
            found.append(event.status_update.status.state)
        elif event.HasField("artifact_update"):
            found.append("artifact")
    return found


@pytest.fixture
def acme(transactional_db):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada")
    return org


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_streamed_message_follows_its_task_until_it_completes(live_url, acme, binding):
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)
    events = []

    async def scenario():
        client = await client_for(url, key, binding, streaming=True)
        async for event in client.send_message(message("Count the rows")):
            events.append(event)

    streamer = threading.Thread(target=run, args=(scenario(),))
    streamer.start()
    move_when({}, status=TaskStatus.IN_PROGRESS)
    deadline = time.monotonic() + 15
    while pb.TASK_STATE_WORKING not in states(events):
        assert time.monotonic() < deadline, states(events)
        time.sleep(0.05)
    move_when({}, status=TaskStatus.COMPLETED, result="3 rows")
    streamer.join(timeout=20)
    assert not streamer.is_alive()
    assert states(events) == [
        pb.TASK_STATE_SUBMITTED,
        pb.TASK_STATE_WORKING,
        "artifact",
        pb.TASK_STATE_COMPLETED,
    ]
    assert events[2].artifact_update.artifact.parts[0].text == "3 rows"


@pytest.mark.parametrize("binding", BINDINGS)
def test_subscribing_follows_an_open_task_and_refuses_an_ended_one(live_url, acme, binding):
    ada = acme.agents.get(handle="ada")
    (task,) = give_tasks(ada, 1)
    (ended,) = give_tasks(ada, 1, status=TaskStatus.COMPLETED)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)
    events = []

    async def scenario():
        client = await client_for(url, key, binding, streaming=True)
        async for event in client.subscribe(pb.SubscribeToTaskRequest(id=str(task.pk))):
            events.append(event)

    streamer = threading.Thread(target=run, args=(scenario(),))
    streamer.start()
    deadline = time.monotonic() + 15
    while not events:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.CANCELLED)
    streamer.join(timeout=20)
    assert states(events) == [pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_CANCELED]

    async def ended_one():
        client = await client_for(url, key, binding, streaming=True)
        async for _ in client.subscribe(pb.SubscribeToTaskRequest(id=str(ended.pk))):
            pass

    with pytest.raises(UnsupportedOperationError):
        run(ended_one())
