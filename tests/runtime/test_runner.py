"""A run (issue 11 §2): the model works the registry's tools as the agent; its answer completes
an untouched task; past max_turns or on a provider error the task is blocked; a refusal goes back
to the model. Both providers' wire formats through the fake server; the offline routine."""

import json

import pytest

from organization.models import Agent
from runtime.models import Run
from tasks import services
from tasks.models import Task, TaskEvent
from tests.factories import give_tasks, make_admin_user
from tests.fake_llm import Reply, ToolUse
from tests.runtime.conftest import drain
from tests.runtime.scripts import call, looks_while, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)

BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def kinds(task) -> list[str]:
    return list(TaskEvent.objects.filter(task=task).order_by("pk").values_list("kind", flat=True))


@BOTH
def test_the_models_final_answer_completes_a_task_it_did_nothing_with(cast, fake_llm, provider):
    managed_by(cast.alex, provider, llm_temperature=0.2, llm_max_tokens=300)
    script(
        fake_llm,
        cast.alex,
        Reply(
            "Looking.",
            tool_calls=[ToolUse("get_organization_roster", {"filter": "all"})],
            prompt_tokens=50,
            completion_tokens=5,
        ),
        Reply("Added the index on orders(created_at).", prompt_tokens=80, completion_tokens=9),
    )
    task = cast.assign(cast.alex, "Index the orders", description="Slow report.")
    (run_id,) = drain()
    run = Run.objects.get(pk=run_id)
    task.refresh_from_db()
    assert (task.status, task.result) == ("completed", "Added the index on orders(created_at).")
    assert kinds(task) == ["created", "status_changed", "status_changed"]
    assert (run.status, run.error, run.provider, run.model) == ("completed", "", provider, "m-1")
    assert (run.prompt_tokens, run.completion_tokens, run.tokens_used) == (130, 14, 144)
    assert run.outcome == [{"task": task.pk, "action": "completed"}]
    assert [(t["kind"], t.get("name"), t.get("status")) for t in run.turns] == [
        ("model", None, None),
        ("tool_call", "get_organization_roster", "ok"),
        ("model", None, None),
    ]
    assert run.turns[1]["result"]["agent_context"]["id"] == "agent-alex"  # run as Alex
    assert run.started_at <= run.finished_at and run.attempts == 1

    first, second = fake_llm.calls_for(agent="agent-alex")
    assert first.api == provider and first.model == "m-1"
    assert (first.temperature, first.max_tokens) == (0.2, 300)
    # The system prompt: custom prompt + organizational context, fresh; the input: the task.
    assert "YOUR ORGANIZATIONAL CONTEXT" in first.system and "Alex" in first.system
    assert "Index the orders" in first.prompt and '"you_hold_it": true' in first.prompt
    assert "get_organization_roster" in first.tool_names and "delegate_task" in first.tool_names
    assert second.tool_results[0]["tool_call_id"] == run.turns[1]["id"]


@BOTH
def test_a_refusal_goes_back_to_the_model_with_its_code(cast, fake_llm, provider):
    managed_by(cast.lena, provider)
    task = cast.assign(cast.lena, "Tune Redis", required_expertise="Redis")
    script(
        fake_llm,
        cast.lena,
        call("delegate_task", task_id=task.pk, agent_id="agent-sam"),
        call("delegate_task", task_id=task.pk, agent_id="agent-morgan"),
        "Delegated to Morgan.",
    )
    drain()
    run = Run.objects.get(agent=cast.lena)
    refused = run.turns[1]
    assert refused["status"] == "error" and refused["error"]["code"] == "agent_offline"
    second = fake_llm.calls_for(agent="agent-lena")[1]
    assert json.loads(second.tool_results[0]["content"])["code"] == "agent_offline"
    task.refresh_from_db()
    # Delegated, so not completed by the answer: the run acted on it.
    assert (task.status, task.assignee) == ("assigned", cast.morgan)
    assert run.outcome == []  # Lena no longer holds it


def test_past_max_turns_the_task_is_blocked_and_needs_attention(cast, fake_llm, client):
    managed_by(cast.alex, "openai", max_turns=2)
    script(fake_llm, cast.alex, call("get_organization_roster", filter="all"))
    task = cast.assign(cast.alex, "Endless")
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.status == "failed" and "max_turns" in run.error
    assert len(fake_llm.calls_for(agent="agent-alex")) == 2
    # The last turn's calls were not run.
    assert [t["kind"] for t in run.turns] == ["model", "tool_call", "model"]
    task.refresh_from_db()
    assert task.status == "blocked"
    blocked = TaskEvent.objects.filter(task=task).order_by("pk").last()
    assert f"Managed run #{run.pk} stopped" in blocked.message and "max_turns" in blocked.notes
    assert run.outcome == [{"task": task.pk, "action": "blocked"}]

    client.force_login(make_admin_user(cast.org))
    page = client.get("/admin/tasks/task/", {"attention": "needs"})
    assert "Endless" in page.content.decode()


@BOTH
def test_a_provider_error_after_the_retries_blocks_the_task(cast, fake_llm, provider, settings):
    settings.COLLAB_PROVIDER_MAX_RETRIES = 1
    managed_by(cast.alex, provider)
    script(fake_llm, cast.alex, Reply(status=500))
    task = cast.assign(cast.alex)
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.status == "failed" and "HTTP 500 after 2 attempt(s)" in run.error
    task.refresh_from_db()
    assert task.status == "blocked"
    assert len(fake_llm.calls_for(agent="agent-alex")) == 2


@BOTH
def test_an_empty_final_answer_completes_nothing_and_blocks_the_task(cast, fake_llm, provider):
    managed_by(cast.alex, provider)
    task = cast.assign(cast.alex, "Index the orders")
    done = cast.assign(cast.alex, "Say hello")
    # One run for both: it completes one, then answers with no text (empty content).
    script(
        fake_llm,
        cast.alex,
        call("complete_task", task_id=done.pk, status="completed", result="Hello."),
        Reply(lambda call: ""),
    )
    services.task_set_status(task=done, actor=cast.actor(cast.alex), status="in_progress")
    drain()
    run = Run.objects.get(agent=cast.alex)
    task.refresh_from_db()
    done.refresh_from_db()
    # Not "completed" with a placeholder result: no work was reported, a human must look.
    assert (task.status, task.result) == ("blocked", "")
    assert "no final answer" in TaskEvent.objects.filter(task=task).order_by("pk").last().notes
    assert (done.status, done.result) == ("completed", "Hello.")  # what it did stands
    assert run.status == "failed" and "no final answer" in run.error
    assert run.outcome == [{"task": task.pk, "action": "blocked"}]


def test_a_task_waiting_for_its_subtasks_is_not_completed_by_the_answer(cast, fake_llm):
    managed_by(cast.lena, "openai")
    parent = cast.assign(cast.lena, "p")

    def split(call):
        return [
            ToolUse(
                "create_subtask", {"parent": parent.pk, "title": "part", "agent_id": "agent-morgan"}
            )
        ]

    script(fake_llm, cast.lena, Reply(tool_calls=split), "Split it.")
    drain()
    parent.refresh_from_db()
    assert parent.status == "assigned" and parent.result == ""
    assert Task.objects.get(parent=parent).assignee == cast.morgan


def test_a_parent_whose_last_subtask_its_holder_finished_itself_is_worked_again(cast, fake_llm):
    """`subtasks_done` wakes the parent's holder, but never for its own act: Lena splits off a
    part for herself and finishes it in the same run, so nothing woke her for the parent, which
    her run had acted on (its answer does not complete it) — it stayed open for ever. Her run's
    end asks for a follow-up run about it, whose answer completes it."""
    managed_by(cast.lena, "openai")
    parent = cast.assign(cast.lena, "p")

    def finish_part(call):  # the part is the task create_subtask answered with
        part_id = json.loads(call.tool_results[0]["content"])["id"]
        return [
            ToolUse("update_task_status", {"task_id": part_id, "status": "in_progress"}),
            ToolUse("complete_task", {"task_id": part_id, "result": "part done"}),
        ]

    script(
        fake_llm,
        cast.lena,
        call("create_subtask", parent=parent.pk, title="part", agent_id="agent-lena"),
        Reply(tool_calls=finish_part),
        "Did the part myself.",
        "The whole is done: part done.",
    )
    first, follow_up = drain()
    parent.refresh_from_db()
    assert (parent.status, parent.result) == ("completed", "The whole is done: part done.")
    assert Run.objects.get(pk=follow_up).trigger == "subtasks_done"
    assert Run.objects.get(pk=first).outcome == [
        {"task": parent.pk, "action": "none", "why": "the run acted on it"}
    ]


@BOTH
@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_pausing_an_agent_stops_its_run_before_the_next_model_call_and_resuming_continues_it(
    cast, fake_llm, provider, vendor, monkeypatch
):
    """Pause is the brake: a human pauses Alex while his run is under way (here, as the model
    asks for its first tool call). The call asked for still runs; the run stops before its next
    model call and goes back to `queued`, its turns kept, its task untouched. A comment while he
    is paused waits. Resuming him continues the run where it stopped (no call made twice), and
    the comment then has a follow-up run of its own (the task is done: it calls no model)."""
    from django.db import connection

    import runtime.sql
    from organization.services import agent_set_paused
    from runtime.models import RunTrigger
    from tests.vendor import SaysItIs

    # The records and wake-ups have a statement of their own on PostgreSQL; `make run`'s SQLite
    # takes the ORM's: both are run here.
    monkeypatch.setattr(runtime.sql, "connection", SaysItIs(connection, vendor))
    managed_by(cast.alex, provider)

    human_pauses_him = Agent.objects.filter(pk=cast.alex.pk).update
    looks_while(fake_llm, cast.alex, lambda: human_pauses_him(is_paused=True))
    task = cast.assign(cast.alex, "Index the orders")
    (run,) = Run.objects.all()
    assert drain() == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.attempts, run.finished_at) == ("queued", 1, None)
    assert [(t["kind"], t.get("status")) for t in run.turns] == [
        ("model", None),
        ("tool_call", "ok"),
    ]
    assert len(fake_llm.calls_for(agent="agent-alex")) == 1
    task.refresh_from_db()
    assert task.status == "assigned"
    services.task_comment(task=task, actor=cast.by_human, body="Thanks!")
    assert list(RunTrigger.objects.filter(run__isnull=True).values_list("trigger", flat=True)) == [
        "comment"
    ]
    assert drain() == []  # held while he is paused

    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    ran = drain()
    assert ran[0] == run.pk and len(ran) == 2
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("completed", 2)
    assert [t["kind"] for t in run.turns] == ["model", "tool_call", "model"]
    task.refresh_from_db()
    assert (task.status, task.result) == ("completed", "Indexed.")
    assert Run.objects.get(pk=ran[1]).trigger == "comment"
    # The resumed run carried the recorded call's result to the model: nothing ran twice.
    first, resumed = fake_llm.calls_for(agent="agent-alex")
    assert len(resumed.tool_results) == 1


def test_a_run_handed_back_after_its_agent_was_resumed_meanwhile_is_sent_at_once(cast):
    """The run read the pause, but the human resumed the agent before the run was handed back
    (resuming found it running, and sent nothing): the hand-back sends it itself."""
    from infrastructure.models import OutboxMessage
    from runtime.lease import CLAIMED, claim
    from runtime.services import run_hand_back

    cast.assign(cast.alex)
    (run,) = Run.objects.all()
    OutboxMessage.objects.all().delete()
    assert claim(run.pk, "tok")[0] == CLAIMED
    assert run_hand_back(run=run, token="tok")
    run.refresh_from_db()
    assert (run.status, run.lease_token, run.attempts) == ("queued", "", 1)
    assert OutboxMessage.objects.filter(args=[run.pk]).exists()
    assert not run_hand_back(run=run, token="tok")  # its lease is gone


def test_only_the_allowed_tools_are_offered(cast, fake_llm):
    managed_by(cast.alex, "openai", allowed_tools=["get_task", "complete_task", "nope"])
    script(fake_llm, cast.alex, "Done.")
    cast.assign(cast.alex)
    drain()
    (call,) = fake_llm.calls_for(agent="agent-alex")
    assert call.tool_names == ["complete_task", "get_task"]


def test_a_run_whose_tasks_are_all_finished_calls_no_model(cast, fake_llm):
    task = cast.assign(cast.alex)
    services.task_cancel(task=task, actor=cast.by_human)
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.status == "completed" and run.turns == []
    assert run.outcome == [{"task": task.pk, "action": "none", "why": "the task is cancelled"}]
    assert fake_llm.calls == []


# --- the offline provider works the organization, deterministically ----------------------------


def test_offline_an_expert_completes_its_task_with_a_placeholder_result(cast, offline):
    task = cast.assign(cast.alex, "Index it", required_expertise="PostgreSQL")
    drain()
    task.refresh_from_db()
    assert task.status == "completed"
    assert task.result.startswith("[offline provider: deterministic placeholder output")
    run = Run.objects.get(agent=cast.alex)
    assert [t.get("name") for t in run.turns if t["kind"] == "tool_call"] == [
        "update_task_status",
        "complete_task",
    ]
    assert run.turns[-1]["text"].startswith("[offline provider")
    assert (run.provider, run.prompt_tokens, run.completion_tokens) == ("offline", 0, 0)


def test_offline_a_task_without_the_expertise_follows_recommend_delegate(cast, offline):
    task = cast.assign(cast.lena, "Build the page", required_expertise="React")
    lena_run, sarah_run = drain()
    task.refresh_from_db()
    assert (task.status, task.assignee) == ("completed", cast.sarah)
    delegated = TaskEvent.objects.get(task=task, kind="delegated")
    assert (delegated.actor_label, delegated.primary_choice, delegated.decision) == (
        "agent-lena",
        "agent-sarah",
        "DELEGATE",
    )
    assert "recommend_delegate" in delegated.notes
    assert Run.objects.get(pk=sarah_run).trigger == "delegated"


def test_offline_routing_queues_for_a_busy_expert(cast, offline):
    give_tasks(cast.morgan, 5)
    task = cast.assign(cast.alex, "Tune Redis", required_expertise="Redis", urgency="low")
    drain()
    task.refresh_from_db()
    assert (task.status, task.queued_for) == ("queued", cast.morgan)


def test_offline_routing_escalates_when_nobody_fits(cast, offline):
    task = cast.assign(cast.alex, "Design the logo", required_expertise="Figma")
    alex_run, lena_run = drain()
    task.refresh_from_db()
    # Alex escalated it to his senior Lena, who found nobody either: to humans.
    escalations = TaskEvent.objects.filter(task=task, kind="escalated").order_by("pk")
    assert [e.actor_label for e in escalations] == ["agent-alex", "agent-lena"]
    assert task.status == "escalated" and task.assignee is None


def test_offline_a_manager_splits_a_task_and_completes_it_from_its_subtasks(cast, offline):
    parent = cast.assign(
        cast.lena, "Launch", description="Parts:\n- The pages (React)\n- The tables (PostgreSQL)"
    )
    ran = drain()
    parent.refresh_from_db()
    subtasks = list(Task.objects.filter(parent=parent).order_by("pk"))
    assert [(s.title, s.status, s.assignee.handle) for s in subtasks] == [
        ("The pages", "completed", "agent-sarah"),
        ("The tables", "completed", "agent-alex"),
    ]
    assert parent.status == "completed"
    assert "The 2 subtask(s)" in parent.result and "The pages" in parent.result
    runs = [Run.objects.get(pk=pk) for pk in ran]
    assert [(r.agent.handle, r.trigger) for r in runs] == [
        ("agent-lena", "created"),
        ("agent-sarah", "delegated"),
        ("agent-alex", "delegated"),
        ("agent-lena", "subtasks_done"),
    ]


def test_offline_runs_are_deterministic(cast, offline):
    def play(title):
        task = cast.assign(cast.lena, title, required_expertise="React")
        drain()
        return [
            [
                (t["kind"], t.get("name"), json.dumps(t.get("arguments"), sort_keys=True))
                for t in r.turns
            ]
            for r in Run.objects.filter(triggers__task=task).order_by("pk")
        ]

    first = play("same")
    Task.objects.filter(title="same").update(title="before")
    second = play("same")
    normalise = lambda runs: json.dumps(runs).replace('"task_id": ', "")  # noqa: E731
    assert len(first) == len(second) == 2
    assert [[s[:2] for s in r] for r in first] == [[s[:2] for s in r] for r in second]
    assert normalise(first).count("agent-sarah") == normalise(second).count("agent-sarah")
