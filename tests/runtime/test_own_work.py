"""Work a run gives its own agent is worked (docs/runtime.md, "The end"): a managed agent is
never woken by its own act, so the run's end asks for the follow-up runs that act would
otherwise never get — or the work waits for ever."""

import json

import pytest

from runtime.context import context_of
from runtime.models import Run
from tasks import services
from tasks.models import Task
from tests.fake_llm import Reply, ToolUse
from tests.runtime.conftest import drain
from tests.runtime.scripts import call, managed_by, script

pytestmark = pytest.mark.django_db(transaction=True)


def lena_splits_the_launch(cast, fake_llm, part: str, to: str, *then) -> Task:
    """Lena (managed) holds "Launch"; her model's first turn splits off `part` for `to`, and its
    next turns are `then`."""
    managed_by(cast.lena)
    parent = cast.assign(cast.lena, "Launch")
    first = call("create_subtask", parent=parent.pk, title=part, agent_id=to)
    script(fake_llm, cast.lena, first, *then)
    return parent


def test_a_subtask_a_run_assigns_to_its_own_agent_is_worked_and_so_is_its_parent(cast, fake_llm):
    """Lena splits off a part of her task for herself and ends her run. Nothing woke her for
    the part (her own act), and her run had acted on the parent: both stayed `assigned` for
    ever. Her run's end asks for a follow-up about the part; the follow-up's answer completes
    it, and that completion (again her own act: no subtasks_done wakes her) asks for one more
    about the parent, whose answer completes it."""
    parent = lena_splits_the_launch(
        cast,
        fake_llm,
        "Announce",
        "agent-lena",
        "Split off the announcement for myself.",
        "Announcement written.",
        "Launched: announcement written.",
    )
    first, part_run, parent_run = drain()
    part = Task.objects.get(parent=parent)
    part.refresh_from_db()
    parent.refresh_from_db()
    assert (part.status, part.result) == ("completed", "Announcement written.")
    assert (parent.status, parent.result) == ("completed", "Launched: announcement written.")
    runs = {r.pk: r for r in Run.objects.filter(agent=cast.lena)}
    assert [(t.trigger, t.task_id) for t in runs[part_run].triggers.all()] == [
        ("assigned", part.pk)
    ]
    assert runs[parent_run].trigger == "subtasks_done" and runs[parent_run].task_id == parent.pk
    assert len(fake_llm.calls_for(agent="agent-lena")) == 4


def test_a_task_a_run_creates_then_claims_for_its_agent_is_worked(cast, fake_llm):
    """Alex files a follow-up task (queued for nobody) and claims it (assign_task without
    agent_id), then ends his run: nothing woke him for it, it stayed `assigned` for ever."""
    managed_by(cast.alex)
    held = cast.assign(cast.alex, "Mine")

    def claim(call):
        return [
            ToolUse("assign_task", {"task_id": json.loads(call.tool_results[0]["content"])["id"]})
        ]

    script(
        fake_llm,
        cast.alex,
        call("create_task", title="Vacuum the orders table"),
        Reply(tool_calls=claim),
        "Mine is done; I took the vacuum on.",
        "Vacuumed.",
    )
    first, follow_up = drain()
    held.refresh_from_db()
    vacuum = Task.objects.get(title="Vacuum the orders table")
    assert (held.status, held.result) == ("completed", "Mine is done; I took the vacuum on.")
    assert (vacuum.status, vacuum.assignee, vacuum.result) == ("completed", cast.alex, "Vacuumed.")
    assert Run.objects.get(pk=follow_up).previous_id == first


def test_a_run_that_assigns_nothing_to_itself_asks_for_no_follow_up(cast, fake_llm):
    lena_splits_the_launch(cast, fake_llm, "Schema", "agent-morgan", "Split.")
    assert len(drain()) == 1
    result = Run.objects.get(agent=cast.lena).turns[1]["result"]
    assert json.loads(json.dumps(result))["assignee"] == "agent-morgan"


def test_a_subtask_a_run_gave_itself_and_started_is_worked_too(cast, fake_llm):

    def start(call):
        part_id = json.loads(call.tool_results[0]["content"])["id"]
        return [ToolUse("update_task_status", {"task_id": part_id, "status": "in_progress"})]

    parent = lena_splits_the_launch(
        cast,
        fake_llm,
        "Announce",
        "agent-lena",
        Reply(tool_calls=start),
        "Started the announcement.",
        "Announcement written.",
        "Launched.",
    )
    assert len(drain()) == 3
    parent.refresh_from_db()
    part = Task.objects.get(parent=parent)
    assert (part.status, part.result) == ("completed", "Announcement written.")
    assert (parent.status, parent.result) == ("completed", "Launched.")


def _gives_itself_a_new_task_each_run(handle):
    """A model that, in every run, files one new task for itself and then answers."""
    made = iter(range(1, 1000))

    def calls(call):
        if call.tool_results:
            return []
        return [ToolUse("create_task", {"title": f"Chore {next(made)}", "agent_id": handle})]

    return Reply(text=lambda call: "Done." if call.tool_results else "", tool_calls=calls)


def test_a_run_woken_only_by_its_own_work_gives_itself_no_more(cast, fake_llm):
    """Alex, in every run, files a new task for himself and answers. His first run (a human's
    task) gets a follow-up for the chore it gave him; that follow-up's answer completes the
    chore, and the chore it files in turn is not worked by a run of his own making (it would
    trigger the next, for ever, burning tokens with no one asking): it is blocked with the
    reason, for a human to see in "Needs attention". Two runs, not one per chore for ever."""
    managed_by(cast.alex)
    held = cast.assign(cast.alex, "Mine")
    script(fake_llm, cast.alex, _gives_itself_a_new_task_each_run("agent-alex"))
    first, follow_up = drain()
    held.refresh_from_db()
    one, two = Task.objects.filter(title__startswith="Chore").order_by("pk")
    assert (held.status, held.result) == ("completed", "Done.")
    assert (one.title, one.status, one.result) == ("Chore 1", "completed", "Done.")
    assert (two.title, two.status, two.assignee) == ("Chore 2", "blocked", cast.alex)
    assert "only its own work had woken" in two.events.order_by("pk").last().notes
    follow_up = Run.objects.get(pk=follow_up)
    assert (follow_up.previous_id, follow_up.status) == (first, "completed")
    assert follow_up.outcome == [
        {"task": one.pk, "action": "completed"},
        {"task": two.pk, "action": "blocked"},
    ]
    assert len(fake_llm.calls_for(agent="agent-alex")) == 4
    # A human asking about the blocked chore wakes him for it, as for any task he holds.
    services.task_comment(task=two, actor=cast.by_human, body="Still needed?")
    woken = Run.objects.get(agent=cast.alex, status="queued")
    assert (woken.trigger, woken.task_id) == ("comment", two.pk)


def test_a_manager_splitting_a_part_for_herself_in_every_run_of_the_parent_is_bounded(
    cast, fake_llm
):
    """Lena, whenever she sees her parent task, splits one more part off it for herself; when
    she sees a part, she answers. The part's follow-up completes it, the parent's follow-up
    (subtasks_done, her own act) splits off another: a chain of runs only her own work woke.
    That run's part is not followed up (blocked with the reason), so the parent waits for it,
    and three runs are all there are."""
    managed_by(cast.lena)
    parent = cast.assign(cast.lena, "Launch")
    made = iter(range(1, 1000))

    def calls(call):
        task = context_of(call.messages[0]["content"])["tasks"][0]
        if call.tool_results or task["parent"] is not None:
            return []
        return [
            ToolUse(
                "create_subtask",
                {"parent": parent.pk, "title": f"Part {next(made)}", "agent_id": "agent-lena"},
            )
        ]

    script(fake_llm, cast.lena, Reply(text="Done.", tool_calls=calls))
    assert len(drain()) == 3
    parent.refresh_from_db()
    one, two = Task.objects.filter(parent=parent).order_by("pk")
    assert parent.status == "assigned"
    assert (one.title, one.status, one.result) == ("Part 1", "completed", "Done.")
    assert (two.title, two.status) == ("Part 2", "blocked")
