"""The A2A conformance kit's agent (`A2A_CONFORMANCE`): an organization and an agent of their own,
made on first use, served without a key; the agent plays the kit's scripted behaviours (by
message-id prefix) on real tasks, through the same services as any agent."""

import asyncio
import uuid
from dataclasses import dataclass

from a2a.types import a2a_pb2 as pb
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction

from organization.caller import Caller, caller_for_agent, caller_for_key
from organization.history import acting_as
from organization.models import Agent, ApiKey, Organization
from organization.services import api_key_create
from tasks import services
from tasks.models import FINISHED_STATUSES, DecisionStatus, HumanDecision, TaskStatus
from tasks.rules import Actor
from tasks.selectors import task_for

ORG_SLUG = "_conformance"
AGENT_HANDLE = "tck"
# Every open task of the kit's runs counts as the agent's workload: room for many runs.
CAPACITY = 10_000
QUESTION = "The A2A conformance kit asks for your input."
# The kit's resubscription task stays working twice its TCK_STREAMING_TIMEOUT (default 2 s).
HOLD_SECONDS = 4.0
# A streamed task completes this long after it starts, so that its stream shows it working.
STREAM_SECONDS = 1.0


@dataclass(frozen=True)
class Script:
    """The agent's part: ask a human (input required), or start the task and complete it `after`
    seconds later with `result` (and `data`)."""

    result: str = ""
    data: dict | None = None
    ask: bool = False
    after: float = 0.0
    # What the engine has no counterpart for, answered by the script itself: a direct message
    # (no task), or a file part put first in the answer's result artifact.
    reply: str = ""
    file: pb.Part | None = None


# The kit's scenarios (its scenarios/*.feature), by message-id prefix.
SCRIPTS = (
    ("test-resubscribe-message-id", Script("Resubscribed task done", after=HOLD_SECONDS)),
    ("tck-stream-artifact-chunked", Script("chunk-1 chunk-2", after=STREAM_SECONDS)),
    ("tck-stream-artifact-text", Script("Streamed text content", after=STREAM_SECONDS)),
    ("tck-stream-artifact-file", Script("Streamed file content", after=STREAM_SECONDS)),
    ("tck-stream-ordering-001", Script("Ordered output", after=STREAM_SECONDS)),
    ("tck-stream-001", Script("Stream hello from TCK", after=STREAM_SECONDS)),
    ("tck-stream-003", Script("Stream task lifecycle", after=STREAM_SECONDS)),
    ("tck-stream-002", Script("Stream done")),
    ("tck-artifact-text", Script("Generated text content")),
    ("tck-artifact-data", Script("", data={"key": "value", "count": 42})),
    (
        "tck-artifact-file-url",
        Script(
            "output.txt",
            file=pb.Part(
                url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"
            ),
        ),
    ),
    (
        "tck-artifact-file",
        Script(
            "output.txt",
            file=pb.Part(raw=b"tck", media_type="text/plain", filename="output.txt"),
        ),
    ),
    ("tck-message-response", Script(reply="Direct message response")),
    ("tck-input-required", Script(ask=True)),
    ("tck-complete-task", Script("Hello from TCK")),
)
DEFAULT = Script("Done")


def script_for(message_id: str) -> Script:
    """The script of the longest prefix `message_id` starts with."""
    found = [(len(prefix), script) for prefix, script in SCRIPTS if message_id.startswith(prefix)]
    return max(found, key=lambda one: one[0])[1] if found else DEFAULT


def reply_to(message: pb.Message) -> pb.Message | None:
    """The script's direct answer to `message`, when it answers with a message and no task."""
    text = script_for(message.message_id).reply
    if not text:
        return None
    return pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.ROLE_AGENT,
        context_id=message.context_id or str(uuid.uuid4()),
        parts=[pb.Part(text=text)],
    )


def dressed(task: pb.Task, message_id: str) -> pb.Task:
    """`task` as the script answers it: its file part first in the result artifact."""
    file = script_for(message_id).file
    if file is not None and task.artifacts:
        parts = [file, *task.artifacts[0].parts]
        del task.artifacts[0].parts[:]
        task.artifacts[0].parts.extend(parts)
    return task


def members() -> tuple[Caller, Agent]:
    """The kit's caller (the organization's own key: a human) and its agent, made on first use."""
    try:
        return _members()
    except IntegrityError:  # two first requests at once: the other one made them
        return _members()


@transaction.atomic
def _members() -> tuple[Caller, Agent]:
    org, _ = Organization.objects.get_or_create(slug=ORG_SLUG, defaults={"name": "A2A conformance"})
    agent, _ = Agent.objects.get_or_create(
        organization=org,
        handle=AGENT_HANDLE,
        defaults={
            "name": "A2A conformance agent",
            "role": "Conformance agent",
            "expertise": ["A2A conformance"],
            "workload_capacity": CAPACITY,
        },
    )
    key = ApiKey.objects.filter(organization=org, agent=None, revoked_at=None).first()
    if key is None:
        key, _ = api_key_create(organization=org, name="A2A conformance kit")
    return caller_for_key(key), agent


def begin(agent: Agent, task_id: str, message_id: str) -> float:
    """The agent's first steps on its task; the seconds after which `finish` completes it (0:
    nothing left to do)."""
    script = script_for(message_id)
    caller = caller_for_agent(agent)
    task = task_for(caller, task_id)
    if task.status in FINISHED_STATUSES:
        return 0.0
    with acting_as(caller):
        if script.ask:
            if not pending_questions(agent, task.pk).exists():
                make_room(caller, agent)
                services.decision_ask(caller=caller, task_id=task.pk, question=QUESTION)
            return 0.0
        withdraw(caller, pending_questions(agent, task.pk))
        if task.status == TaskStatus.ASSIGNED:
            task = services.task_set_status(
                task=task, actor=Actor.of(caller), status=TaskStatus.IN_PROGRESS
            )
    if script.after:
        return script.after
    finish(agent, task_id, message_id)
    return 0.0


def finish(agent: Agent, task_id: str, message_id: str) -> None:
    """The agent completes its task with the script's result, unless it has ended meanwhile."""
    script = script_for(message_id)
    caller = caller_for_agent(agent)
    task = task_for(caller, task_id)
    if task.status != TaskStatus.IN_PROGRESS:
        return
    with acting_as(caller):
        services.task_set_status(
            task=task,
            actor=Actor.of(caller),
            status=TaskStatus.COMPLETED,
            result=script.result,
            result_data=script.data,
        )


def pending_questions(agent: Agent, task_id: int | None = None):
    rows = HumanDecision.objects.filter(requested_by=agent, status=DecisionStatus.PENDING)
    return rows.filter(task_id=task_id) if task_id is not None else rows


def withdraw(caller: Caller, decisions) -> None:
    for pk in decisions.values_list("pk", flat=True):
        services.decision_cancel(caller=caller, pk=pk)


def make_room(caller: Caller, agent: Agent) -> None:
    """The agent withdraws its oldest questions past the bound of pending decisions (the kit
    leaves tasks waiting for input behind, run after run)."""
    pending = pending_questions(agent).order_by("pk")
    extra = pending.count() - settings.DECISIONS_MAX_PENDING_PER_AGENT + 1
    if extra > 0:
        withdraw(caller, pending.filter(pk__in=pending.values("pk")[:extra]))


def _run(function, *args):
    try:
        return function(*args)
    finally:
        close_old_connections()


off_the_loop = sync_to_async(_run, thread_sensitive=False)
# The completions due later, kept referenced until they run.
LATER: set[asyncio.Task] = set()


async def play(agent: Agent, task_id: str, message_id: str) -> None:
    """The agent's part on the task a message made or commented on: its first steps now, its
    completion later when the script says so (in this process)."""
    after = await off_the_loop(begin, agent, task_id, message_id)
    if after:
        job = asyncio.create_task(finish_later(after, agent, task_id, message_id))
        LATER.add(job)
        job.add_done_callback(LATER.discard)


async def finish_later(after: float, agent: Agent, task_id: str, message_id: str) -> None:
    await asyncio.sleep(after)
    await off_the_loop(finish, agent, task_id, message_id)
