"""Durable runs, in process (the real-worker SIGKILL is in test_worker.py): a run that died is
resumed from its recorded turns; a tool call that took effect is not repeated, one that did not
is run again; a worker that lost its lease commits nothing; no task event is written twice."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from organization.models import Agent
from runtime import runner
from runtime import services as runtime_services
from runtime.lease import BUSY, CLAIMED, FINISHED, claim
from runtime.models import Run, RunTrigger
from runtime.runner import run_agent
from tasks import services
from tasks.models import InboxItem, Task, TaskComment, TaskEvent
from tests.conftest import requires_postgres
from tests.fake_llm import Reply, ToolUse
from tests.runtime.scripts import calling, script

pytestmark = pytest.mark.django_db(transaction=True)


class WorkerDied(BaseException):
    """Stands for the process being killed: nothing of the run's own handling runs after it."""


def comment_then_answer(fake_llm, task):
    script(
        fake_llm,
        "agent-alex",
        calling(ToolUse("comment_on_task", {"task_id": task.pk, "body": "On it."}, id="c1")),
        "Done: the index is there.",
    )


def expire_lease(run_id):
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))


def dies_on_model_call(monkeypatch, run_id: int, number: int = 2) -> None:
    """Run `run_id` until its `number`th model call, where its worker dies (the run stays
    `running`, its lease held); the model is called normally again afterwards."""
    real = runner.TurnRecorder.complete
    calls = []

    def dies(self, request):
        calls.append(1)
        if len(calls) == number:
            raise WorkerDied
        return real(self, request)

    monkeypatch.setattr(runner.TurnRecorder, "complete", dies)
    with pytest.raises(WorkerDied):
        run_agent(run_id)
    monkeypatch.setattr(runner.TurnRecorder, "complete", real)


def take_over(run_id):
    try:
        Run.objects.filter(pk=run_id).update(lease_token="someone-else")
    finally:
        connection.close()


def no_event_twice(task):
    rows = list(
        TaskEvent.objects.filter(task=task).values_list(
            "kind", "actor_label", "before", "after", "message"
        )
    )
    assert len(rows) == len({repr(r) for r in rows}), rows


@pytest.fixture
def alex_on_openai(cast, fake_llm):
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    return fake_llm


def test_a_run_killed_after_a_call_took_effect_resumes_without_repeating_it(
    cast, alex_on_openai, monkeypatch
):
    task = cast.assign(cast.alex)
    comment_then_answer(alex_on_openai, task)
    run = Run.objects.get(agent=cast.alex)
    dies_on_model_call(monkeypatch, run.pk)
    run.refresh_from_db()
    assert run.status == "running"
    assert [(t["kind"], t.get("status")) for t in run.turns] == [
        ("model", None),
        ("tool_call", "ok"),
    ]
    assert TaskComment.objects.count() == 1

    assert claim(run.pk, "other")[0] == BUSY  # its lease is still fresh
    expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, run.attempts) == ("completed", 2)
    assert TaskComment.objects.count() == 1  # the call that had taken effect was not repeated
    assert task.status == "assigned"  # it commented: the run acted on it
    no_event_twice(task)
    assert len(alex_on_openai.calls_for(agent="agent-alex")) == 2
    assert claim(run.pk, "again")[0] == FINISHED


def test_a_run_killed_inside_a_call_runs_it_again_once_on_resume(cast, alex_on_openai, monkeypatch):
    task = cast.assign(cast.alex)
    comment_then_answer(alex_on_openai, task)
    real = runtime_services.run_record_turn
    died = []

    def dies_recording_the_outcome(*, turn, **kwargs):
        if not died and turn.get("status") == "ok":
            died.append(1)
            raise WorkerDied  # the comment was written, its record not yet committed
        return real(turn=turn, **kwargs)

    monkeypatch.setattr(runtime_services, "run_record_turn", dies_recording_the_outcome)
    run = Run.objects.get(agent=cast.alex)
    with pytest.raises(WorkerDied):
        run_agent(run.pk)
    run.refresh_from_db()
    # The call has no record (it is recorded once, with its outcome): the last is the model
    # turn that asked for it.
    assert run.turns[-1]["kind"] == "model" and run.turns[-1]["tool_calls"]
    assert TaskComment.objects.count() == 0  # rolled back with its record
    expire_lease(run.pk)
    run_agent(run.pk)
    run.refresh_from_db()
    assert run.status == "completed" and run.attempts == 2
    assert list(TaskComment.objects.values_list("body", flat=True)) == ["On it."]
    assert TaskEvent.objects.filter(task=task, kind="comment").count() == 1
    no_event_twice(task)


@requires_postgres()  # another worker takes the run over on its own connection, under row locks
@pytest.mark.postgres
def test_a_worker_that_lost_its_lease_commits_nothing(cast, alex_on_openai, monkeypatch):
    task = cast.assign(cast.alex)
    comment_then_answer(alex_on_openai, task)
    real = runtime_services.run_record_turn

    def taken_over(*, run, turn, **kwargs):
        if turn.get("status") == "ok":
            # Another worker takes the run over meanwhile (its own connection, committed).
            thread = threading.Thread(target=take_over, args=(run.pk,))
            thread.start()
            thread.join()
        return real(run=run, turn=turn, **kwargs)

    monkeypatch.setattr(runtime_services, "run_record_turn", taken_over)
    run = Run.objects.get(agent=cast.alex)
    run_agent(run.pk)
    run.refresh_from_db()
    assert run.status == "running" and run.lease_token == "someone-else"
    assert TaskComment.objects.count() == 0


def test_the_sweep_sends_again_a_run_whose_heartbeat_stopped(cast, alex_on_openai):
    cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    Run.objects.filter(pk=run.pk).update(
        status="running", lease_token="dead", heartbeat_at=timezone.now()
    )
    assert runtime_services.sweep_runs() == {"resent": [], "woken": []}
    expire_lease(run.pk)
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now() - timedelta(hours=1))
    assert runtime_services.sweep_runs() == {"resent": [run.pk], "woken": []}
    run.refresh_from_db()
    assert run.dispatched_at > timezone.now() - timedelta(minutes=1)


def an_hour_ago(task):
    InboxItem.objects.filter(task=task).update(created_at=timezone.now() - timedelta(hours=1))


def lose_the_wake_up(task):
    """As if the process died between the task's commit and its wake-up: nothing the wake-up
    writes exists; the task reached its agent an hour ago."""
    RunTrigger.objects.filter(task=task).delete()
    Run.objects.filter(agent=task.assignee).delete()
    an_hour_ago(task)


def test_the_sweep_wakes_an_agent_whose_wake_up_was_lost(cast):
    task = cast.assign(cast.alex)
    lose_the_wake_up(task)
    assert runtime_services.sweep_runs() == {"resent": [], "woken": [cast.alex.pk]}
    (run,) = Run.objects.filter(agent=cast.alex)
    # The lost wake-up is sent again as it was: its trigger, its task.
    assert (run.status, run.trigger, run.task_id) == ("queued", "created", task.pk)
    assert runtime_services.sweep_runs()["woken"] == []  # woken once: its trigger says so


def test_the_sweep_wakes_the_holder_of_a_parent_whose_subtasks_done_was_lost(cast):
    parent = cast.assign(cast.lena, "p")
    services.task_set_status(task=parent, actor=cast.actor(cast.lena), status="in_progress")
    sub = cast.assign(cast.alex, "s", by=cast.actor(cast.lena), parent=parent)
    services.task_set_status(task=sub, actor=cast.actor(cast.alex), status="in_progress")
    Run.objects.filter(agent=cast.lena).update(status="completed", finished_at=timezone.now())
    services.task_set_status(task=sub, actor=cast.actor(cast.alex), status="completed", result="r")
    # The parent's holder was told (inbox) but its wake-up was lost; the parent is in progress.
    RunTrigger.objects.filter(task=parent, trigger="subtasks_done").delete()
    Run.objects.filter(agent=cast.lena, status="queued").delete()
    # Two hours ago the parent reached Lena (and woke her), an hour ago its subtasks were done.
    RunTrigger.objects.filter(agent=cast.lena).update(
        created_at=timezone.now() - timedelta(hours=2)
    )
    InboxItem.objects.filter(task=parent, kind="subtasks_done").update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    Run.objects.filter(agent=cast.alex).delete()
    RunTrigger.objects.filter(agent=cast.alex).delete()
    assert runtime_services.sweep_runs()["woken"] == [cast.lena.pk]
    (run,) = Run.objects.filter(agent=cast.lena, status="queued")
    assert (run.trigger, run.task_id) == ("subtasks_done", parent.pk)


def test_the_sweep_does_not_send_again_a_managed_agents_comment(cast):
    """Managed agents answering each other's comments are bounded (RUNTIME_MAX_AGENT_COMMENT_WAKES):
    the sweep does not replay their conversation an hour later."""
    task = cast.assign(cast.alex, by=cast.actor(cast.sarah))
    # Two hours ago the task reached Alex (and woke him); an hour ago came the comments.
    RunTrigger.objects.filter(agent=cast.alex).update(
        created_at=timezone.now() - timedelta(hours=2)
    )
    services.task_comment(task=task, actor=cast.actor(cast.sarah), body="Any news?")
    RunTrigger.objects.filter(agent=cast.alex, trigger="comment").delete()
    InboxItem.objects.filter(task=task, kind="comment").update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    assert runtime_services.sweep_runs()["woken"] == []
    # A human's comment whose wake-up was lost is sent again.
    services.task_comment(task=task, actor=cast.by_human, body="And?")
    RunTrigger.objects.filter(agent=cast.alex, trigger="comment").delete()
    InboxItem.objects.filter(task=task, kind="comment").update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    assert runtime_services.sweep_runs()["woken"] == [cast.alex.pk]


def test_the_sweep_wakes_none_for_a_task_a_run_saw_its_own_act_or_a_paused_or_external_agent(cast):
    seen = cast.assign(cast.alex, "seen")
    an_hour_ago(seen)
    # Its run saw it and left it assigned (a question asked in a comment), then ended.
    Run.objects.filter(agent=cast.alex).update(status="completed", finished_at=timezone.now())
    held = cast.assign(cast.sarah, "held")
    lose_the_wake_up(held)
    Agent.objects.filter(pk=cast.sarah.pk).update(is_paused=True)
    external = cast.assign(cast.morgan, "external")
    an_hour_ago(external)
    # An agent's own act wakes it never, the sweep included: it gets no inbox item for it.
    own = cast.assign(cast.lena, "own", by=cast.actor(cast.lena))
    Task.objects.filter(pk=own.pk).update(assigned_at=timezone.now() - timedelta(hours=1))
    assert runtime_services.sweep_runs() == {"resent": [], "woken": []}
    assert not Run.objects.filter(status="queued").exists()


@requires_postgres()  # the budget counts PostgreSQL's statements
@pytest.mark.postgres
def test_the_hot_path_of_a_run_stays_within_its_query_budget(
    cast, offline, django_assert_max_num_queries
):
    cast.assign(cast.alex, "Index it", required_expertise="PostgreSQL")
    run = Run.objects.get(agent=cast.alex)
    # 36 today: the claim (4), the context (7; a first attempt reads no earlier turns), 2 model
    # turns and 2 tool calls (each a move with its audit row, recorded once in the move's
    # transaction, the move's block no savepoint of its own: infrastructure/atomic.py), the
    # settle and the finish (5). 43 with the move's savepoint; 48 when a call was also recorded
    # before it ran, inside a savepoint.
    with django_assert_max_num_queries(36):
        run_agent(run.pk)
    run.refresh_from_db()
    assert run.status == "completed"


def test_the_sweeps_beat_schedule_is_seeded_once(db):
    from django.conf import settings
    from django_celery_beat.models import PeriodicTask

    from runtime.apps import RUN_SWEEP_NAME, ensure_run_sweep_schedule

    ensure_run_sweep_schedule()
    ensure_run_sweep_schedule()
    task = PeriodicTask.objects.get(name=RUN_SWEEP_NAME)
    assert task.task == "runtime.sweep_runs"
    assert task.interval.every == int(settings.RUNTIME_SWEEP_INTERVAL.total_seconds())


def test_a_run_of_an_agent_no_longer_managed_fails_without_a_model_call(cast, alex_on_openai):
    task = cast.assign(cast.alex)
    cast.alex.runtime = "external"
    cast.alex.save()
    run = Run.objects.get(agent=cast.alex)
    run_agent(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "no longer managed" in run.error
    assert alex_on_openai.calls == []
    task.refresh_from_db()
    assert task.status == "assigned"


def test_a_paused_agents_queued_run_is_held_until_it_is_resumed(cast, offline):
    from organization.models import Agent
    from organization.services import agent_set_paused
    from runtime.lease import HELD

    cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=True)
    assert run_agent(run.pk) == HELD
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("queued", 0)
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_run_that_never_finishes_is_given_up_after_its_maximum_starts(
    cast, alex_on_openai, monkeypatch, settings
):
    """A run that kills its worker every time (a crash, a time limit) is failed on the start
    after RUNTIME_MAX_ATTEMPTS, without another model call, and its task blocked with the
    reason: it does not loop for ever, paying its model on every start."""
    settings.RUNTIME_MAX_ATTEMPTS = 2
    task = cast.assign(cast.alex)
    alex_on_openai.on(agent="agent-alex", replies=[Reply("never heard")] * 3)
    real = runner.TurnRecorder.complete

    def dies_after_the_model_answers(self, request):
        real(self, request)
        raise WorkerDied

    monkeypatch.setattr(runner.TurnRecorder, "complete", dies_after_the_model_answers)
    run = Run.objects.get(agent=cast.alex)
    for _ in range(2):
        with pytest.raises(WorkerDied):
            run_agent(run.pk)
        expire_lease(run.pk)
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, run.attempts) == ("failed", 3)
    assert run.error.startswith("Given up after 2 starts that did not finish")
    assert task.status == "blocked"
    assert "Given up after 2 starts" in task.events.filter(kind="status_changed").last().message
    assert len(alex_on_openai.calls_for(agent="agent-alex")) == 2
    assert claim(run.pk, "again")[0] == FINISHED
    no_event_twice(task)
