"""A run's page reads as a conversation: the model's words, each tool call with its arguments
and a readable answer (folded when long), the trigger and the outcome in words."""

import pytest
from django.urls import reverse

from runtime.models import Run, RunStatus, RunTrigger, RunTurn
from tasks.models import Task
from tests.console.pages import queries_of
from tests.factories import make_admin_user, make_agent, make_org

pytestmark = pytest.mark.django_db


@pytest.fixture
def worked_run():
    org = make_org("acme")
    lena, kai = make_agent(org, "agent-lena"), make_agent(org, "agent-kai")
    task = Task.objects.create(organization=org, title="Ship the release", assignee=lena)
    waker = Run.objects.create(
        organization=org, agent=kai, trigger="assigned", status=RunStatus.COMPLETED
    )
    run = Run.objects.create(
        organization=org,
        agent=lena,
        task=task,
        trigger="subtasks_done",
        status=RunStatus.COMPLETED,
        outcome=[
            {"task": task.pk, "action": "completed"},
            {"task": 999_999, "action": "none", "why": "open subtasks"},
        ],
    )
    RunTrigger.objects.create(
        organization=org, agent=lena, run=run, task=task, trigger="subtasks_done", woken_by=waker
    )
    turns = [
        {
            "kind": "model",
            "text": "Every part is **done**. <script>alert(1)</script>",
            "tool_calls": [{"id": "c1", "name": "get_task"}],
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "provider_ms": 850,
        },
        {
            "kind": "tool_call",
            "id": "c1",
            "name": "get_task",
            "arguments": {"task_id": task.pk},
            "status": "ok",
            "result": {
                "id": task.pk,
                "title": "Ship the release",
                "subtasks": [{"id": n, "status": "completed"} for n in range(9)],
            },
        },
        {
            "kind": "tool_call",
            "id": "c2",
            "name": "complete_task",
            "arguments": {"task_id": task.pk, "result": "Shipped."},
            "status": "error",
            "error": {
                "success": False,
                "error": "The task has open subtasks.",
                "code": "open_subtasks",
            },
        },
        {
            "kind": "tool_call",
            "id": "c3",
            "name": "whoami",
            "arguments": {},
            "status": "ok",
            "result": {"handle": "agent-lena"},
        },
    ]
    for index, data in enumerate(turns):
        RunTurn.objects.create(run=run, index=index, data={"index": index, **data})
    return org, run, task


def test_a_run_page_tells_the_model_words_and_each_call_with_its_answer(client, worked_run):
    org, run, task = worked_run
    client.force_login(make_admin_user(org))
    response = client.get(reverse("admin:runtime_run_change", args=[run.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    # The model's words as Markdown, its raw HTML as text.
    assert "Every part is <strong>done</strong>." in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    # Each call: its name, its arguments as lines, its answer as indented JSON, folded when long.
    assert 'Called <code class="tool-name">get_task</code>' in page
    assert f"<dt>task_id</dt><dd>{task.pk}</dd>" in page
    assert '<details class="result"><summary>Answered with id, title, subtasks' in page
    assert f"&quot;id&quot;: {task.pk},\n  &quot;title&quot;" in page
    assert "<dt>result</dt><dd>Shipped.</dd>" in page
    assert "Refused: The task has open subtasks." in page
    assert (
        'Answered:</span><pre class="tool-result">{\n  &quot;handle&quot;: &quot;agent-lena&quot;\n}</pre>'
        in page
    )
    # No JSON written on one line.
    assert "{&quot;" not in page
    # What woke it and what the runtime did, in words.
    assert "The last open subtask of its task finished" in page

    assert "agent-kai" in page
    assert f"Task #{task.pk} “Ship the release”: completed with the model&#x27;s final answer." in (
        page
    )
    assert "Task #999999: left as it was (open subtasks)." in page
    assert "subtasks_done" not in page


def test_a_run_page_is_one_bound_of_queries(client, worked_run, django_assert_max_num_queries):
    org, run, _ = worked_run
    client.force_login(make_admin_user(org))
    url = reverse("admin:runtime_run_change", args=[run.pk])
    client.get(url)
    with django_assert_max_num_queries(12):
        assert client.get(url).status_code == 200


def _run_with_triggers(org, runner, waker, n):
    from runtime.models import Run, RunStatus, RunTrigger

    run = Run.objects.create(
        organization=org, agent=runner, trigger="comment", status=RunStatus.COMPLETED
    )
    other = Run.objects.create(
        organization=org, agent=waker, trigger="assigned", status=RunStatus.COMPLETED
    )
    for i in range(n):
        task = Task.objects.create(organization=org, title=f"t{run.pk}-{i}")
        RunTrigger.objects.create(
            organization=org, agent=runner, run=run, task=task, trigger="comment", woken_by=other
        )
    return run


def test_a_run_page_answers_in_as_many_queries_for_2_and_40_triggers(
    root_client, db, django_assert_max_num_queries
):
    org = make_org("acme")
    runner, waker = make_agent(org, "agent-boss"), make_agent(org, "agent-helper")
    small = _run_with_triggers(org, runner, waker, 2)
    big = _run_with_triggers(org, runner, waker, 40)
    bound = queries_of(root_client, reverse("admin:runtime_run_change", args=[small.pk]))
    big_url = reverse("admin:runtime_run_change", args=[big.pk])
    root_client.get(big_url)
    with django_assert_max_num_queries(bound):
        assert root_client.get(big_url).status_code == 200
