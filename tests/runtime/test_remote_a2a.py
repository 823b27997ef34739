"""A remote A2A agent (runtime `a2a`, issue 38 §2) against the SDK's own A2A server on 127.0.0.1
with a scripted executor: each way its task can end comes back onto our task, and a remote that
hangs, refuses, answers malformed or too much ends the task blocked with the reason."""

import asyncio
from datetime import timedelta

import pytest
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import a2a_pb2 as pb
from django.db import connections
from django.utils import timezone
from google.protobuf.struct_pb2 import Value

from costs.budgets import budget_set
from infrastructure.models import OutboxMessage
from organization.caller import Caller, caller_for_agent
from organization.models import Agent, AgentRuntime
from organization.services import agent_card_refresh, agent_set_paused
from runtime.remote_a2a import SEND_TASK, UnderWay, deliver, time_limit
from tasks import services
from tasks.models import InboxItem, Task, TaskComment, TaskEvent, TaskStatus
from tasks.rules import Actor
from tests.console.pages import page_of
from tests.factories import make_admin_user, make_agent, make_org

from .a2a_remote import RemoteAgent, answers_big, asks, completes, fails, never_finishes, rejects

pytestmark = pytest.mark.django_db

HUMAN = Actor("user", "Pat")


@pytest.fixture(autouse=True)
def local_remote(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True  # the remote listens on 127.0.0.1
    settings.A2A_REMOTE_TIMEOUT_SECONDS = 2
    settings.A2A_REMOTE_MAX_WAIT_SECONDS = 10


def remote_member(org, remote: RemoteAgent, handle="agent-gopher", **fields):
    agent = make_agent(
        org, handle, runtime=AgentRuntime.A2A, a2a_card_url=remote.card_url, **fields
    )
    return agent_card_refresh(agent=agent)


def sent_to(agent, title="Port the billing job", description="It is in Python today."):
    org = agent.organization
    return services.task_create(
        org=org, actor=HUMAN, title=title, description=description, assignee=agent
    )


def block_note(task) -> str:
    event = TaskEvent.objects.filter(task=task, after__status=TaskStatus.BLOCKED).latest("pk")
    return event.notes


def test_a_completed_remote_task_completes_ours_with_the_artifacts_text_and_data():
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote)
        task = sent_to(gopher)
        assert deliver(task.pk, "created") == "completed"
    task.refresh_from_db()
    assert task.status == TaskStatus.COMPLETED
    assert task.result == "Done: Port the billing job"
    assert task.result_data == {"rows": 3, "checked": "Port the billing job"}
    assert remote.executor.received == ["Port the billing job\n\nIt is in Python today."]
    # Its card's skills are its expertise; the moves are the agent's own.
    assert gopher.expertise == ["Go", "gRPC"]
    assert list(
        TaskEvent.objects.filter(task=task).order_by("pk").values_list("actor_label", flat=True)
    ) == ["Pat", "agent-gopher", "agent-gopher"]


@pytest.mark.parametrize(
    "script, reason",
    [
        (rejects, "The remote A2A agent rejected the task: I only take Go work."),
        (fails, "The remote A2A agent failed the task: The build server is down."),
    ],
)
def test_a_remote_that_refuses_or_fails_blocks_the_task_with_its_reason(
    script, reason, admin_client
):
    org = make_org("acme")
    with RemoteAgent(script) as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert task.status == TaskStatus.BLOCKED
    assert block_note(task) == reason
    # Needs attention: its page opens on the banner with the remote's words.
    banner = page_of(admin_client, task).split('id="attention-banner"')[1].split("</section>")[0]
    assert "Blocked by" in banner and reason in banner


def test_a_remote_asking_for_input_comments_to_the_delegator_and_a_reply_sends_it_again():
    org = make_org("acme")
    lead = make_agent(org, "agent-lead", name="Lead")
    with RemoteAgent(asks) as remote:
        gopher = remote_member(org, remote, senior=lead)
        task = services.task_create(org=org, actor=HUMAN, title="Deploy it", assignee=lead)
        task = services.task_delegate(task=task, actor=Actor.of(caller_for_agent(lead)), to=gopher)
        assert deliver(task.pk, "delegated") == "blocked"
        task.refresh_from_db()
        assert task.status == TaskStatus.BLOCKED
        assert block_note(task).startswith(
            "The remote A2A agent needs input: Which region should it deploy to?"
        )
        asked = TaskComment.objects.get(task=task)
        assert (asked.author, asked.body) == (
            gopher,
            "The remote agent asks: Which region should it deploy to?",
        )
        assert InboxItem.objects.filter(agent=lead, task=task, kind="comment").exists()
        # The delegator answers with a comment: the task is sent again, with the comments.
        services.task_comment(
            task=task, actor=Actor.of(caller_for_agent(lead)), body="eu-west, please."
        )
        assert deliver(task.pk, "comment") == "completed"
    task.refresh_from_db()
    assert (task.status, task.result) == (TaskStatus.COMPLETED, "Deployed to eu-west.")
    assert "- agent-lead: eu-west, please." in remote.executor.received[-1]


def test_a_remote_that_never_finishes_is_given_up_after_the_maximum_wait(settings):
    settings.A2A_REMOTE_MAX_WAIT_SECONDS = 1
    org = make_org("acme")
    with RemoteAgent(never_finishes) as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert task.status == TaskStatus.BLOCKED
    assert block_note(task).startswith(
        "The remote A2A agent did not finish within 1 s (A2A_REMOTE_MAX_WAIT_SECONDS); its task "
    )


def test_a_remote_that_hangs_is_given_up_after_the_call_timeout(settings):
    settings.A2A_REMOTE_TIMEOUT_SECONDS = 1
    org = make_org("acme")
    with RemoteAgent(rpc="hang") as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert block_note(task) == (
        "The remote A2A agent did not answer within 1 s (A2A_REMOTE_TIMEOUT_SECONDS)."
    )


def test_a_malformed_answer_blocks_the_task():
    org = make_org("acme")
    with RemoteAgent(rpc="malformed") as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert block_note(task) == (
        "The remote A2A agent could not be reached or answered malformed: "
        "A2AClientError: JSON Decode Error: Expecting value: line 1 column 1 (char 0)"
    )


def test_an_answer_over_the_size_limit_is_not_read_and_blocks_the_task(settings):
    settings.A2A_REMOTE_MAX_RESPONSE_BYTES = 4096
    org = make_org("acme")
    with RemoteAgent(answers_big) as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert block_note(task) == (
        "The remote A2A agent could not be reached or answered malformed: "
        "A2AClientError: Network communication error: the answer is longer than 4096 bytes"
    )


def test_a_remote_that_is_gone_blocks_the_task():
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote)
    # The server is stopped: its port refuses the connection.
    task = sent_to(gopher)
    assert deliver(task.pk, "created") == "blocked"
    task.refresh_from_db()
    assert block_note(task) == (
        "The remote A2A agent could not be reached or answered malformed: "
        "A2AClientError: Network communication error: All connection attempts failed"
    )


def test_its_token_is_read_from_the_environment_variable_it_names(monkeypatch):
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote, a2a_token_env="A2A_TOKEN_GOPHER")
        unset = sent_to(gopher, title="First")
        monkeypatch.delenv("A2A_TOKEN_GOPHER", raising=False)
        assert deliver(unset.pk, "created") == "blocked"
        monkeypatch.setenv("A2A_TOKEN_GOPHER", "s3cret")
        task = sent_to(gopher, title="Second")
        assert deliver(task.pk, "created") == "completed"
    assert block_note(unset) == (
        "Not sent: the environment variable A2A_TOKEN_GOPHER holding the remote A2A agent's token "
        "is not set."
    )
    assert remote.executor.received == ["Second\n\nIt is in Python today."]
    assert remote.executor.headers[0]["authorization"] == "Bearer s3cret"


def test_an_exhausted_budget_blocks_the_task_and_nothing_is_sent():
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote)
        task = sent_to(gopher)
        budget_set(
            caller=Caller(organization=org, user=make_admin_user(org)),
            scope="agent",
            agent="agent-gopher",
            limit_usd="0",
        )
        assert deliver(task.pk, "created") == "blocked"
    assert block_note(task) == (
        "Not sent to the remote A2A agent: the agent budget agent-gopher holds it back "
        "(spent this month); raise it, then comment on the task to send it."
    )
    assert remote.executor.received == []


def test_a_paused_remote_agent_is_sent_its_tasks_when_resumed(django_capture_on_commit_callbacks):
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote)
        task = sent_to(gopher)
        Agent.objects.filter(pk=gopher.pk).update(is_paused=True)
        assert deliver(task.pk, "created") == "its agent is paused (resuming it sends the task)"
        task.refresh_from_db()
        assert task.status == TaskStatus.ASSIGNED
        with django_capture_on_commit_callbacks(execute=True):
            agent_set_paused(agents=Agent.objects.filter(pk=gopher.pk), paused=False)
        sends = OutboxMessage.objects.filter(task_name=SEND_TASK).order_by("pk")
        assert [m.args for m in sends][-1] == [task.pk, "resumed"]
        assert deliver(task.pk, "resumed") == "completed"


def test_a_delivery_finding_the_task_in_progress_waits_then_blocks_an_interrupted_one():
    """A second delivery (its worker died under the first) looks again once the first must
    have ended; finding the task still in progress then, it blocks it."""
    org = make_org("acme")
    with RemoteAgent(completes) as remote:
        gopher = remote_member(org, remote)
    task = sent_to(gopher)
    services.task_set_status(
        task=task, actor=Actor.of(caller_for_agent(gopher)), status=TaskStatus.IN_PROGRESS
    )
    again = deliver(task.pk, "created")
    assert isinstance(again, UnderWay) and again.seconds > time_limit()
    assert deliver(task.pk, "comment") == (
        "under way: the comment is not sent (the remote already works on the task)"
    )
    Task.objects.filter(pk=task.pk).update(updated_at=timezone.now() - timedelta(hours=2))
    assert deliver(task.pk, "created") == "interrupted: blocked"
    assert block_note(task) == (
        "Its delivery to the remote A2A agent was interrupted (its worker stopped)."
    )


@pytest.mark.django_db(transaction=True)
def test_no_database_connection_is_held_while_the_remote_works():
    main = connections["default"]  # this thread's connection, looked at from the remote's
    held = []

    async def looks_then_completes(updater, text):
        held.append(main.connection is not None)
        await completes(updater, text)

    org = make_org("acme")
    with RemoteAgent(looks_then_completes) as remote:
        task = sent_to(remote_member(org, remote))
        assert deliver(task.pk, "created") == "completed"
    assert held == [False]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("move", ["reassigned", "cancelled"])
def test_a_remote_answer_landing_after_the_task_moved_leaves_it_untouched(move):
    """The remote asks for input while a human gives the task to someone else or cancels it:
    its question is no comment on a task its agent no longer works on, and the task is left
    as the human left it."""
    org = make_org("acme")
    ana = make_agent(org, "agent-ana", name="Ana")

    def human_moves(task_id):
        try:
            task = Task.objects.get(pk=task_id)
            if move == "reassigned":
                services.task_assign(task=task, actor=HUMAN, to=ana)
            else:
                services.task_cancel(task=task, actor=HUMAN, reason="Not needed.")
        finally:
            connections.close_all()

    async def moved_then_asks(updater, text):
        await asyncio.to_thread(human_moves, sent["task"])
        await asks(updater, text)

    sent = {}
    with RemoteAgent(moved_then_asks) as remote:
        gopher = remote_member(org, remote)
        task = sent_to(gopher)
        sent["task"] = task.pk
        assert deliver(task.pk, "created").startswith("not applied:")
    task.refresh_from_db()
    if move == "reassigned":
        assert (task.status, task.assignee) == (TaskStatus.ASSIGNED, ana)
    else:
        assert (task.status, task.assignee) == (TaskStatus.CANCELLED, gopher)
    assert not TaskComment.objects.filter(task=task).exists()


@pytest.mark.parametrize("part", ["text", "data", "reason"])
def test_what_the_database_cannot_hold_in_an_answer_is_replaced(part):
    """A NUL character (PostgreSQL's text and jsonb hold none) in the remote's words comes back
    as U+FFFD, as in a model's answer: its work is kept, not an error leaving the task in
    progress."""

    async def answers_nul(updater, text):
        if part == "reason":
            await updater.reject(new_text_message("No\x00pe."))
            return
        data = Value()
        data.struct_value.update({"no\x00te": "a\x00b"})
        await updater.start_work()
        await updater.add_artifact([pb.Part(text="Done\x00"), pb.Part(data=data)])
        await updater.complete()

    org = make_org("acme")
    with RemoteAgent(answers_nul) as remote:
        task = sent_to(remote_member(org, remote))
        deliver(task.pk, "created")
    task.refresh_from_db()
    if part == "reason":
        assert task.status == TaskStatus.BLOCKED
        assert block_note(task) == "The remote A2A agent rejected the task: No\ufffdpe."
    else:
        assert task.status == TaskStatus.COMPLETED
        assert (task.result, task.result_data) == ("Done\ufffd", {"no\ufffdte": "a\ufffdb"})
