"""SendMessage, GetTask, ListTasks, CancelTask with the SDK's client over both bindings: the
tasks engine's rules and visibility, refusals as REJECTED with their code, 401 without a key."""

import threading
import time
import uuid
from datetime import timedelta

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.utils import timezone

from organization.caller import caller_for_agent
from tasks import services
from tasks.models import (
    ActorKind,
    HumanDecision,
    PolicyTrigger,
    RefusalCount,
    Task,
    TaskComment,
    TaskStatus,
)
from tasks.rules import Actor
from tests.factories import give_tasks, make_agent, make_key, make_org
from tests.infrastructure.test_auth_throttling import an_address
from tests.organization.mcp.live import run

from .conftest import agent_url, client_for

pytestmark = pytest.mark.django_db(transaction=True)
BINDINGS = ["JSONRPC", "HTTP+JSON"]


def message(text: str, context_id: str = "") -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id=str(uuid.uuid4()),
            role=pb.ROLE_USER,
            context_id=context_id,
            parts=[pb.Part(text=text)],
        )
    )


async def send(client, request) -> pb.Task:
    answers = [answer async for answer in client.send_message(request)]
    assert len(answers) == 1 and answers[0].HasField("task"), answers
    return answers[0].task


@pytest.fixture
def acme(transactional_db):
    org = make_org("acme")
    make_agent(org, "ada", name="Ada", workload_capacity=2)
    make_agent(org, "bob", name="Bob")
    return org


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_becomes_a_task_for_the_agent_then_get_list_cancel(live_url, acme, binding):
    key = make_key(acme, acme.agents.get(handle="bob"))
    url = agent_url(live_url, acme, "ada")

    async def scenario():
        client = await client_for(url, key, binding)
        sent = await send(client, message("Fix the nightly load\nIt fails since Monday."))
        got = await client.get_task(pb.GetTaskRequest(id=sent.id))
        listed = await client.list_tasks(pb.ListTasksRequest())
        cancelled = await client.cancel_task(pb.CancelTaskRequest(id=sent.id))
        return sent, got, listed, cancelled

    sent, got, listed, cancelled = run(scenario())
    task = Task.objects.get(pk=int(sent.id))
    assert task.title == "Fix the nightly load"
    assert task.description == "Fix the nightly load\nIt fails since Monday."
    assert task.assignee.handle == "ada" and task.created_by_agent.handle == "bob"
    assert sent.context_id == sent.id
    assert sent.status.state == pb.TASK_STATE_SUBMITTED
    assert got.id == sent.id and got.status.state == pb.TASK_STATE_SUBMITTED
    assert [t.id for t in listed.tasks] == [sent.id]
    assert cancelled.status.state == pb.TASK_STATE_CANCELED
    task.refresh_from_db()
    assert task.status == TaskStatus.CANCELLED


@pytest.mark.parametrize("binding", BINDINGS)
def test_an_agent_at_capacity_is_rejected_with_the_rules_code(live_url, acme, binding):
    give_tasks(acme.agents.get(handle="ada"), 2)
    before = Task.objects.count()
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        return await send(client, message("One more thing"))

    rejected = run(scenario())
    assert rejected.status.state == pb.TASK_STATE_REJECTED
    assert dict(rejected.status.message.metadata) == {"code": "capacity_exceeded"}
    assert "at capacity" in rejected.status.message.parts[0].text
    assert Task.objects.count() == before
    # Counted by code, as a refusal at any other door (agent_org_refusals_total).
    assert RefusalCount.objects.get(organization=acme, code="capacity_exceeded").count == 1


def test_a_message_with_a_known_context_id_is_a_comment(live_url, acme):
    url = agent_url(live_url, acme, "ada")
    key = make_key(acme)

    async def scenario():
        client = await client_for(url, key)
        first = await send(client, message("Write the report"))
        again = await send(client, message("Add the Q3 numbers too", context_id=first.id))
        return first, again

    first, again = run(scenario())
    assert again.id == first.id
    assert Task.objects.count() == 1
    (comment,) = TaskComment.objects.all()
    assert comment.task_id == int(first.id) and comment.body == "Add the Q3 numbers too"


def test_a_completed_task_carries_its_result_as_artifact(live_url, acme):
    (task,) = give_tasks(acme.agents.get(handle="ada"), 1, status=TaskStatus.COMPLETED)
    Task.objects.filter(pk=task.pk).update(result="Done: 3 rows", result_data={"rows": 3})
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key)
        return await client.get_task(pb.GetTaskRequest(id=str(task.pk)))

    got = run(scenario())
    assert got.status.state == pb.TASK_STATE_COMPLETED
    (artifact,) = got.artifacts
    assert artifact.parts[0].text == "Done: 3 rows"
    assert artifact.parts[1].data.struct_value["rows"] == 3


@pytest.mark.parametrize("binding", BINDINGS)
def test_another_organizations_task_is_not_found(live_url, acme, binding):
    other = make_org("other")
    (theirs,) = give_tasks(make_agent(other, "eve"), 1)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        await client.get_task(pb.GetTaskRequest(id=str(theirs.pk)))

    with pytest.raises(TaskNotFoundError):
        run(scenario())


def test_another_organizations_agent_is_404(live_url, acme):
    make_agent(make_org("other"), "eve")
    key = make_key(acme)
    answer = httpx.post(
        f"{live_url}/a2a/other/eve/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "1"}},
        headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"},
    )
    assert answer.status_code == 404


@pytest.mark.parametrize("key", [None, "ao_nope_nope"])
def test_no_key_or_a_bad_one_is_401_on_both_bindings(live_url, acme, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    base = agent_url(live_url, acme, "ada")
    rpc = httpx.post(
        base + "/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "1"}},
        headers=headers,
    )
    rest = httpx.get(base + "/tasks/1", headers=headers)
    assert (rpc.status_code, rest.status_code) == (401, 401)


def test_the_documented_curl_call_creates_a_task(live_url, acme):
    key = make_key(acme)
    answer = httpx.post(
        f"{live_url}/a2a/acme/ada/",
        headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Fix it"}]}
            },
        },
    )
    assert answer.status_code == 200
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert Task.objects.get(pk=int(task["id"])).title == "Fix it"


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_finished_task_is_not_cancelable(live_url, acme, binding):
    (task,) = give_tasks(acme.agents.get(handle="ada"), 1, status=TaskStatus.COMPLETED)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        await client.cancel_task(pb.CancelTaskRequest(id=str(task.pk)))

    with pytest.raises(TaskNotCancelableError):
        run(scenario())


def test_a_blocking_send_answers_when_the_task_completes(live_url, acme, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 20
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)
    answers = []

    async def scenario():
        client = await client_for(url, key)
        answers.append(await send(client, message("Count the rows")))

    sender = threading.Thread(target=run, args=(scenario(),))
    started = time.monotonic()
    sender.start()
    deadline = started + 15
    while not Task.objects.exists():
        assert time.monotonic() < deadline, "the message made no task"
        time.sleep(0.05)
    Task.objects.update(status=TaskStatus.COMPLETED, result="3 rows", result_data={"rows": 3})
    sender.join(timeout=20)
    (answer,) = answers
    assert answer.status.state == pb.TASK_STATE_COMPLETED
    assert answer.artifacts[0].parts[0].text == "3 rows"
    assert time.monotonic() - started < 15


def test_a_blocking_send_answers_the_current_state_at_its_timeout(live_url, acme, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 1
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, "HTTP+JSON")
        return await send(client, message("Count the rows"))

    started = time.monotonic()
    answer = run(scenario())
    assert answer.status.state == pb.TASK_STATE_SUBMITTED
    assert 1 <= time.monotonic() - started < 10


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_the_database_cannot_hold_is_invalid_params(live_url, acme, binding):
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        await send(client, message("Fix \x00 it"))

    with pytest.raises(InvalidParamsError):
        run(scenario())
    assert not Task.objects.exists()


def test_failed_authentications_lock_the_address_out_as_on_every_door(live_url, acme, settings):
    settings.AUTH_FAILURE_LIMIT = 2
    base = agent_url(live_url, acme, "ada")
    # An address of its own (the counter lives in the cache, shared by the whole run), taken
    # by uvicorn from X-Forwarded-For of a trusted proxy (127.0.0.1).
    headers = {"Authorization": "Bearer ao_nope_nope", "X-Forwarded-For": an_address()}
    codes = [httpx.get(base + "/tasks/1", headers=headers).status_code for _ in range(3)]
    assert codes == [401, 401, 429]


def test_states_a_pending_decision_and_a_failure_map_to(live_url, acme):
    ada = acme.agents.get(handle="ada")
    asking, failed = give_tasks(ada, 2, status=TaskStatus.IN_PROGRESS)
    HumanDecision.objects.create(
        organization=acme, kind="question", requester_label="ada", task=asking, question="Which?"
    )
    Task.objects.filter(pk=failed.pk).update(status=TaskStatus.FAILED, result="No access")
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key)
        return await client.list_tasks(pb.ListTasksRequest())

    listed = {task.id: task.status for task in run(scenario()).tasks}
    assert listed[str(asking.pk)].state == pb.TASK_STATE_INPUT_REQUIRED
    assert listed[str(failed.pk)].state == pb.TASK_STATE_FAILED
    assert listed[str(failed.pk)].message.parts[0].text == "No access"


def test_an_agent_lists_only_the_tasks_it_may_see_a_human_all(live_url, acme):
    ada, bob = acme.agents.get(handle="ada"), acme.agents.get(handle="bob")
    (unseen,) = give_tasks(ada, 1)
    url, bobs_key, org_key = agent_url(live_url, acme, "ada"), make_key(acme, bob), make_key(acme)

    async def scenario():
        as_bob = await client_for(url, bobs_key)
        sent = await send(as_bob, message("Review my draft"))
        seen_by_bob = await as_bob.list_tasks(pb.ListTasksRequest())
        as_human = await client_for(url, org_key)
        seen_by_human = await as_human.list_tasks(pb.ListTasksRequest())
        return sent, seen_by_bob, seen_by_human

    sent, seen_by_bob, seen_by_human = run(scenario())
    assert [t.id for t in seen_by_bob.tasks] == [sent.id]
    assert [t.id for t in seen_by_human.tasks] == [sent.id, str(unseen.pk)]


@pytest.mark.parametrize("binding", BINDINGS)
def test_list_tasks_filters_by_status_and_context_id(live_url, acme, binding):
    ada = acme.agents.get(handle="ada")
    open_one, asking = give_tasks(ada, 2, status=TaskStatus.IN_PROGRESS)
    HumanDecision.objects.create(
        organization=acme, kind="question", requester_label="ada", task=asking, question="?"
    )
    (done,) = give_tasks(ada, 1, status=TaskStatus.COMPLETED)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        return [
            [t.id for t in (await client.list_tasks(request)).tasks]
            for request in (
                pb.ListTasksRequest(status=pb.TASK_STATE_WORKING),
                pb.ListTasksRequest(status=pb.TASK_STATE_INPUT_REQUIRED),
                pb.ListTasksRequest(status=pb.TASK_STATE_COMPLETED),
                pb.ListTasksRequest(context_id=str(done.pk)),
            )
        ]

    assert run(scenario()) == [[str(open_one.pk)], [str(asking.pk)], [str(done.pk)], [str(done.pk)]]


def test_a_creation_an_approval_policy_gates_is_rejected_awaiting_approval(live_url, acme):
    services.policy_create(
        org=acme, name="Everything waits", trigger=PolicyTrigger.URGENCY, urgencies=["normal"]
    )
    url, key = agent_url(live_url, acme, "ada"), make_key(acme, acme.agents.get(handle="bob"))

    async def scenario():
        client = await client_for(url, key)
        return await send(client, message("Ship it"))

    rejected = run(scenario())
    assert rejected.status.state == pb.TASK_STATE_REJECTED
    assert dict(rejected.status.message.metadata) == {"code": "awaiting_approval"}
    assert not Task.objects.exists()
    (decision,) = HumanDecision.objects.all()
    assert decision.status == "pending" and decision.action["name"] == "create_task"


def test_a_message_to_a_managed_agent_wakes_it(live_url, acme):
    """An A2A message is work like any other: the managed agent it reaches gets a run."""
    from runtime.models import Run

    ada = acme.agents.get(handle="ada")
    ada.runtime = "managed"
    ada.save(update_fields=["runtime"])
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, "JSONRPC")
        return await send(client, message("Rotate the keys"))

    sent = run(scenario())
    woken = Run.objects.get(agent=ada)
    assert (woken.status, woken.task_id) == ("queued", int(sent.id))


def continuing(text: str, task_id: str, context_id: str = "") -> pb.SendMessageRequest:
    request = message(text, context_id)
    request.message.task_id = task_id
    return request


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_message_continues_only_an_open_task_it_names_rightly(live_url, acme, binding):
    ada = acme.agents.get(handle="ada")
    (done,) = give_tasks(ada, 1, status=TaskStatus.COMPLETED)
    (other_org_task,) = give_tasks(make_agent(make_org("other"), "eve"), 1)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def answer(request):
        client = await client_for(url, key, binding)
        try:
            return await send(client, request)
        except Exception as exc:  # the SDK raises the protocol's error
            return exc

    async def scenario():
        opened = await send(await client_for(url, key, binding), message("Write the report"))
        return opened, [
            await answer(continuing("More", "9999999")),
            await answer(continuing("More", str(other_org_task.pk))),
            await answer(continuing("More", str(done.pk))),
            await answer(continuing("More", opened.id, context_id="another-context")),
            await answer(continuing("Add the Q3 numbers", opened.id, context_id=opened.id)),
        ]

    opened, (unknown, theirs, ended, mismatched, continued) = run(scenario())
    assert isinstance(unknown, TaskNotFoundError) and isinstance(theirs, TaskNotFoundError)
    assert isinstance(ended, UnsupportedOperationError)
    assert isinstance(mismatched, InvalidParamsError)
    assert continued.id == opened.id
    (comment,) = TaskComment.objects.all()
    assert comment.task_id == int(opened.id) and comment.body == "Add the Q3 numbers"
    assert Task.objects.filter(organization=acme).count() == 2


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_file_part_is_an_unsupported_content_type(live_url, acme, binding):
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)
    request = message("See the attached sheet")
    request.message.parts.append(pb.Part(raw=b"a,b", media_type="text/csv", filename="q3.csv"))

    async def scenario():
        client = await client_for(url, key, binding)
        await send(client, request)

    with pytest.raises(ContentTypeNotSupportedError):
        run(scenario())
    assert not Task.objects.exists()


@pytest.mark.parametrize("binding", BINDINGS)
def test_list_tasks_pages_by_the_latest_status_change(live_url, acme, binding):
    ada = acme.agents.get(handle="ada")
    tasks = give_tasks(ada, 4, status=TaskStatus.COMPLETED)
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(result="Done")
    # Two share their status timestamp: the id breaks the tie.
    same = timezone.now()
    for task, moment in zip(
        tasks, [same - timedelta(hours=1), same, same, same - timedelta(hours=2)], strict=True
    ):
        Task.objects.filter(pk=task.pk).update(updated_at=moment)
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        pages, token = [], ""
        while True:
            page = await client.list_tasks(pb.ListTasksRequest(page_size=3, page_token=token))
            pages.append(page)
            if not page.next_page_token:
                break
            token = page.next_page_token
        with_artifacts = await client.list_tasks(pb.ListTasksRequest(include_artifacts=True))
        try:
            await client.list_tasks(pb.ListTasksRequest(page_token="not-a-token"))
        except InvalidParamsError as exc:
            refused = exc
        return pages, with_artifacts, refused

    pages, with_artifacts, refused = run(scenario())
    first, second, third, fourth = tasks
    assert [[t.id for t in page.tasks] for page in pages] == [
        [str(third.pk), str(second.pk), str(first.pk)],
        [str(fourth.pk)],
    ]
    assert [page.total_size for page in pages] == [4, 4]
    assert all(not t.artifacts for page in pages for t in page.tasks)
    assert [t.artifacts[0].parts[0].text for t in with_artifacts.tasks] == ["Done"] * 4
    assert isinstance(refused, InvalidParamsError)


def test_a_page_token_is_a_position_only_never_a_scope(live_url, acme):
    """A token from Ada's list used at Bob's URL, or one crafted to start past every task, lists
    only the tasks of that URL's agent the caller may see: never another agent's or organization's."""
    ada, bob = acme.agents.get(handle="ada"), acme.agents.get(handle="bob")
    # Older than Ada's: after her first page's token, in the list's order.
    (theirs,) = give_tasks(make_agent(make_org("other"), "eve", name="Eve"), 1)
    (bobs,) = give_tasks(bob, 1)
    adas = give_tasks(ada, 3)
    key = make_key(acme)
    crafted = f"{10**17}.{theirs.pk + 1000}"  # after every task there is

    async def scenario():
        at_ada = await client_for(agent_url(live_url, acme, "ada"), key)
        at_bob = await client_for(agent_url(live_url, acme, "bob"), key)
        first = await at_ada.list_tasks(pb.ListTasksRequest(page_size=1))
        token = first.next_page_token
        on_bob = await at_bob.list_tasks(pb.ListTasksRequest(page_token=token))
        from_the_end = await at_ada.list_tasks(pb.ListTasksRequest(page_token=crafted))
        return first, on_bob, from_the_end

    first, on_bob, from_the_end = run(scenario())
    assert [t.id for t in first.tasks] == [str(adas[-1].pk)]
    assert [t.id for t in on_bob.tasks] == [str(bobs.pk)]
    assert [t.id for t in from_the_end.tasks] == [str(t.pk) for t in reversed(adas)]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_tasks_history_is_its_conversation_the_last_messages_asked(live_url, acme, binding):
    ada = acme.agents.get(handle="ada")
    (task,) = give_tasks(ada, 1)
    Task.objects.filter(pk=task.pk).update(description="Write the report")
    services.task_comment(task=task, actor=Actor.of(caller_for_agent(ada)), body="Which quarter?")
    human = Actor(ActorKind.USER, "org-key:test")
    services.task_comment(task=task, actor=human, body="Q3")
    url, key = agent_url(live_url, acme, "ada"), make_key(acme)

    async def scenario():
        client = await client_for(url, key, binding)
        return [
            await client.get_task(pb.GetTaskRequest(id=str(task.pk), **length))
            for length in ({}, {"history_length": 2}, {"history_length": 0})
        ]

    whole, last_two, none = run(scenario())
    assert [(m.role, m.parts[0].text) for m in whole.history] == [
        (pb.ROLE_USER, "Write the report"),
        (pb.ROLE_AGENT, "Which quarter?"),
        (pb.ROLE_USER, "Q3"),
    ]
    assert [m.parts[0].text for m in last_two.history] == ["Which quarter?", "Q3"]
    assert list(none.history) == []
