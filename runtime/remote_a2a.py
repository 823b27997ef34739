"""Work sent to a remote A2A agent (runtime `a2a`): a task it holds is sent with the SDK's client
(`SendMessage`), followed by `GetTask` until it ends or A2A_REMOTE_MAX_WAIT_SECONDS pass, and its
end is brought back through the engine's services as the agent's own moves (docs/a2a.md).

Every way the exchange can go wrong — no answer, a refusal, a malformed or oversized answer, a
remote that never finishes — ends the task `blocked` with the reason, never a task left running."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientTimeoutError
from a2a.types import a2a_pb2 as pb
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from costs.budgets import blocking_budget
from infrastructure import outbox, tracing
from infrastructure.connections import release_connection
from infrastructure.errors import DomainError
from infrastructure.inputs import value_problem
from organization import remote_a2a
from organization.caller import caller_for_agent
from organization.models import Agent, AgentRuntime
from organization.services import agent_card_refresh
from tasks import services as task_services
from tasks.models import (
    NOTE_MAX_LENGTH,
    RESULT_DATA_MAX_BYTES,
    RESULT_MAX_LENGTH,
    Task,
    TaskComment,
    TaskStatus,
)
from tasks.rules import Actor

log = logging.getLogger(__name__)

SEND_TASK = "runtime.send_to_remote_a2a"

# The inbox kinds that send a task to its remote holder: it reached the agent, or (blocked,
# waiting for input) someone commented on it.
SENDING_KINDS = frozenset(
    {"created", "assigned", "auto_assigned", "delegated", "escalated", "comment"}
)
# A card older than this is fetched again before work is sent (its skills, its interfaces).
CARD_FRESH_FOR = timedelta(hours=1)
# How often a remote task is asked for its state: from the first to the last, doubling.
POLL_FIRST_SECONDS, POLL_LAST_SECONDS = 0.2, 5.0
# The comments a message carries (the latest, oldest first): what was said since it was sent.
COMMENTS_SENT = 10
# What PostgreSQL's text and jsonb cannot hold.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The remote's answers that end the exchange.
ENDED = {
    pb.TASK_STATE_COMPLETED,
    pb.TASK_STATE_FAILED,
    pb.TASK_STATE_CANCELED,
    pb.TASK_STATE_REJECTED,
    pb.TASK_STATE_INPUT_REQUIRED,
    pb.TASK_STATE_AUTH_REQUIRED,
}
STATE_WORDS = {
    pb.TASK_STATE_FAILED: "failed the task",
    pb.TASK_STATE_CANCELED: "cancelled the task",
    pb.TASK_STATE_REJECTED: "rejected the task",
    pb.TASK_STATE_AUTH_REQUIRED: "asks for authentication we cannot give",
}


def time_limit() -> int:
    """The longest one delivery can take: the wait, and a timeout for each call around it."""
    return settings.A2A_REMOTE_MAX_WAIT_SECONDS + 4 * settings.A2A_REMOTE_TIMEOUT_SECONDS + 30


# --- what sends it --------------------------------------------------------------------------


def on_work(*, agent: Agent, trigger: str, task: Task) -> None:
    """Work reached a remote A2A agent: queue its delivery (through the outbox)."""
    if trigger in SENDING_KINDS:
        with transaction.atomic():
            outbox.enqueue(SEND_TASK, task.pk, trigger)


def send_held(*, agent_id: int) -> int:
    """Queue the delivery of every task the agent holds and was not sent (made remote, or
    resumed, while holding it); how many."""
    ids = list(
        Task.objects.filter(
            assignee_id=agent_id, assignee__runtime=AgentRuntime.A2A, status=TaskStatus.ASSIGNED
        ).values_list("pk", flat=True)
    )
    with transaction.atomic():
        for pk in ids:
            outbox.enqueue(SEND_TASK, pk, "resumed")
    return len(ids)


# --- one delivery ---------------------------------------------------------------------------


@dataclass
class Answer:
    """How the remote's task ended, as the engine takes it."""

    status: str  # completed or blocked
    result: str = ""
    result_data: dict | None = None
    reason: str = ""
    question: str = ""  # the remote asks for input: a comment to the task's delegator


@dataclass
class UnderWay:
    """Another delivery of the task is under way; look again in `seconds` (it has ended by then)."""

    seconds: float


@dataclass
class Sending:
    task_id: int
    agent: Agent
    text: str
    token: str | None = None
    card: dict = field(default_factory=dict)


def deliver(task_id: int, trigger: str = "") -> str | UnderWay:
    """Send the task to its remote holder and bring its end back; what became of it."""
    sending = _claim(task_id, trigger)
    if not isinstance(sending, Sending):
        return sending
    actor = Actor.of(caller_for_agent(sending.agent))
    try:
        answer = _prepare(sending)
        if answer is None:
            release_connection()  # nothing is held while the remote works
            with tracing.invoke_agent(sending.agent, task=task_id, remote=True):
                answer = asyncio.run(exchange(sending))
    except Exception as exc:  # whatever breaks, the task must not be left in progress
        log.exception("task %s: the remote A2A agent's exchange broke", task_id)
        answer = Answer("blocked", reason=f"internal error: {type(exc).__name__}: {exc}")
    said = [answer.result, answer.result_data, answer.reason, answer.question]
    problem = value_problem(said, "answer")
    if problem:  # what the database cannot hold and _storable leaves (a number out of range)
        reason = f"The remote A2A agent's answer could not be stored: {problem}."
        answer = Answer("blocked", reason=reason)
    return _settle(task_id, actor, answer)


def _claim(task_id: int, trigger: str) -> Sending | UnderWay | str:
    """Move the task to in_progress as its remote holder (what makes one delivery its sender),
    or say why nothing is sent."""
    task = Task.objects.select_related("assignee").filter(pk=task_id).first()
    agent = task.assignee if task else None
    if agent is None or not agent.is_remote_a2a:
        return "not held by a remote A2A agent"
    if agent.is_paused:
        return "its agent is paused (resuming it sends the task)"
    if task.status == TaskStatus.IN_PROGRESS:
        return _under_way(task, agent, trigger)
    if task.status not in (TaskStatus.ASSIGNED, TaskStatus.BLOCKED):
        return f"the task is {task.status}"
    if task.status == TaskStatus.BLOCKED and trigger != "comment":
        return "blocked: a comment on it sends it again"
    actor = Actor.of(caller_for_agent(agent))
    try:
        task_services.task_set_status(
            task=task,
            actor=actor,
            status=TaskStatus.IN_PROGRESS,
            note=f"Sent to the remote A2A agent ({agent.a2a_card_url}).",
        )
    except DomainError as exc:  # moved meanwhile, or another delivery took it
        return f"not sent: {exc}"
    return Sending(task_id=task.pk, agent=agent, text=message_text(task))


def _under_way(task: Task, agent: Agent, trigger: str) -> UnderWay | str:
    """A task in progress with its remote holder: another delivery sends it, or one whose
    worker died did. Past the time any delivery takes, it is blocked (sent again on a comment)."""
    if trigger == "comment":
        return "under way: the comment is not sent (the remote already works on the task)"
    age = (timezone.now() - task.updated_at).total_seconds()
    left = time_limit() + 30 - age
    if left > 0:
        return UnderWay(seconds=left)
    reason = "Its delivery to the remote A2A agent was interrupted (its worker stopped)."
    _settle(task.pk, Actor.of(caller_for_agent(agent)), Answer("blocked", reason=reason))
    return "interrupted: blocked"


def message_text(task: Task) -> str:
    """What the remote is sent: the task's title and description, then the latest comments."""
    parts = [task.title]
    if task.description:
        parts.append(task.description)
    latest = TaskComment.objects.filter(task_id=task.pk).order_by("-pk")[:COMMENTS_SENT]
    comments = list(latest)[::-1]
    if comments:
        parts.append(
            "Comments on the task:\n" + "\n".join(f"- {c.author_label}: {c.body}" for c in comments)
        )
    return "\n\n".join(parts)


def _prepare(sending: Sending) -> Answer | None:
    """The card (fetched again when stale) and the token: an Answer when the task cannot be
    sent (out of budget, no token, no card), else None."""
    agent = sending.agent
    budget = blocking_budget(agent)
    if budget is not None:
        return Answer(
            "blocked",
            reason=f"Not sent to the remote A2A agent: the {budget} holds it back "
            "(spent this month); raise it, then comment on the task to send it.",
        )
    if agent.a2a_token_env:
        sending.token = os.environ.get(agent.a2a_token_env)
        if not sending.token:
            return Answer(
                "blocked",
                reason=f"Not sent: the environment variable {agent.a2a_token_env} holding the "
                "remote A2A agent's token is not set.",
            )
    fetched = agent.a2a_card_fetched_at
    if not agent.a2a_card or fetched is None or timezone.now() - fetched > CARD_FRESH_FOR:
        release_connection()
        try:
            agent_card_refresh(agent=agent)
        except remote_a2a.CardRefused as exc:
            if not agent.a2a_card:
                return Answer("blocked", reason=f"Not sent: its agent card: {exc}")
            log.warning(
                "%s: its card could not be refreshed (%s); the stored one is used",
                agent.handle,
                exc,
            )
    sending.card = agent.a2a_card
    return None


# --- the exchange (no database) -------------------------------------------------------------


async def exchange(sending: Sending) -> Answer:
    """SendMessage, then GetTask until the remote's task ends or the wait is over."""
    timeout = settings.A2A_REMOTE_TIMEOUT_SECONDS
    max_wait = settings.A2A_REMOTE_MAX_WAIT_SECONDS
    loop = asyncio.get_running_loop()
    give_up = loop.time() + max_wait
    async with remote_a2a.remote_client(sending.token) as http:
        config = ClientConfig(
            streaming=False,
            polling=True,  # returnImmediately: the task is followed with GetTask
            httpx_client=http,
            supported_protocol_bindings=list(remote_a2a.BINDINGS),
        )
        try:
            client = await create_client(remote_a2a.card_of(sending.card), client_config=config)
            request = pb.SendMessageRequest(
                message=pb.Message(
                    message_id=str(uuid.uuid4()),
                    role=pb.ROLE_USER,
                    parts=[pb.Part(text=sending.text)],
                )
            )
            request.message.metadata.update({"agentOrgTask": str(sending.task_id)})
            first = await asyncio.wait_for(_first(client.send_message(request)), timeout + 1)
            if first.HasField("message"):
                return answer_of_message(first.message)
            if not first.HasField("task"):
                return Answer(
                    "blocked", reason="The remote A2A agent answered neither a task nor a message."
                )
            task = first.task
            poll = POLL_FIRST_SECONDS
            while task.status.state not in ENDED:
                if loop.time() + poll > give_up:
                    await _cancel(client, task.id, timeout)
                    return Answer(
                        "blocked",
                        reason=f"The remote A2A agent did not finish within {max_wait} s "
                        f"(A2A_REMOTE_MAX_WAIT_SECONDS); its task {task.id} was "
                        f"{pb.TaskState.Name(task.status.state)} (a cancel was asked).",
                    )
                await asyncio.sleep(poll)
                poll = min(poll * 2, POLL_LAST_SECONDS)
                task = await asyncio.wait_for(
                    client.get_task(pb.GetTaskRequest(id=task.id)), timeout + 1
                )
            return answer_of_task(task)
        except (TimeoutError, A2AClientTimeoutError):
            return Answer(
                "blocked",
                reason=f"The remote A2A agent did not answer within {timeout} s "
                "(A2A_REMOTE_TIMEOUT_SECONDS).",
            )
        except Exception as exc:
            return Answer(
                "blocked",
                reason=f"The remote A2A agent could not be reached or answered malformed: "
                f"{type(exc).__name__}: {exc}",
            )


async def _first(stream):
    async for answer in stream:
        return answer
    raise ValueError("the remote answered nothing")


async def _cancel(client, task_id: str, timeout: float) -> None:
    """Ask the remote to stop the task we gave up on; its answer changes nothing here."""
    try:
        await asyncio.wait_for(client.cancel_task(pb.CancelTaskRequest(id=task_id)), timeout + 1)
    except Exception as exc:
        log.info("remote task %s: cancel not taken (%s)", task_id, exc)


def _storable(value):
    """`value` with every NUL and lone surrogate in its strings (keys too) as U+FFFD: what
    PostgreSQL cannot hold, replaced as in a model's answer (collaboration/providers/base.py)."""
    if isinstance(value, str):
        return UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _texts(parts) -> list[str]:
    return [_storable(p.text) for p in parts if p.WhichOneof("content") == "text" and p.text]


def _data(parts) -> list:
    return [_storable(MessageToDict(p.data)) for p in parts if p.WhichOneof("content") == "data"]


def answer_of_message(message: pb.Message) -> Answer:
    """A remote that answers with a message (no task) has done the work: its text is the result."""
    return _completed(_texts(message.parts), _data(message.parts))


def answer_of_task(task: pb.Task) -> Answer:
    state = task.status.state
    said = "\n".join(_texts(task.status.message.parts)) if task.status.HasField("message") else ""
    if state == pb.TASK_STATE_COMPLETED:
        parts = [p for artifact in task.artifacts for p in artifact.parts]
        texts = _texts(parts) or ([said] if said else [])
        return _completed(texts, _data(parts))
    if state == pb.TASK_STATE_INPUT_REQUIRED:
        question = said or "(no question given)"
        return Answer(
            "blocked",
            reason=f"The remote A2A agent needs input: {question} (a comment on the task sends "
            "it again with the comments).",
            question=question,
        )
    what = STATE_WORDS.get(state, f"ended in {pb.TaskState.Name(state)}")
    return Answer("blocked", reason=f"The remote A2A agent {what}: {said or 'no reason given'}")


def _completed(texts: list[str], data: list) -> Answer:
    result = "\n\n".join(texts)
    if len(result) > RESULT_MAX_LENGTH:
        result = result[: RESULT_MAX_LENGTH - 1] + "…"
    result_data = None
    if data:
        result_data = data[0] if len(data) == 1 and isinstance(data[0], dict) else {"data": data}
        if len(json.dumps(result_data)) > RESULT_DATA_MAX_BYTES:
            return Answer(
                "blocked",
                reason=f"The remote A2A agent's data is larger than {RESULT_DATA_MAX_BYTES} "
                "bytes, the most a task's result_data may hold.",
            )
    if not result and result_data is None:
        return Answer("blocked", reason="The remote A2A agent completed with no result.")
    return Answer("completed", result=result, result_data=result_data)


# --- bringing it back -----------------------------------------------------------------------


def _settle(task_id: int, actor: Actor, answer: Answer) -> str:
    """The remote's end as the agent's moves: completed, or blocked with the reason (after a
    comment with the remote's question, in one transaction). A task moved meanwhile (cancelled,
    given to another agent) is left as it is, with no comment."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return "gone"
    try:
        if answer.status == "completed":
            task_services.task_set_status(
                task=task,
                actor=actor,
                status=TaskStatus.COMPLETED,
                result=answer.result,
                result_data=answer.result_data,
            )
            return "completed"
        with transaction.atomic():
            if answer.question:
                task_services.task_comment(
                    task=task, actor=actor, body=f"The remote agent asks: {answer.question}"[:5000]
                )
            task_services.task_set_status(
                task=task,
                actor=actor,
                status=TaskStatus.BLOCKED,
                note=answer.reason[:NOTE_MAX_LENGTH],
            )
        return "blocked"
    except DomainError as exc:
        log.info("task %s: the remote's end is not applied (%s)", task_id, exc)
        return f"not applied: {exc}"
