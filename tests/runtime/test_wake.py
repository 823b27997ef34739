"""Wake on events only (issue 11 §2): work reaching a managed agent starts, joins or waits for a
run; its own act, a paused agent and an external agent start nothing; resuming wakes."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from infrastructure import outbox
from organization.models import Agent
from organization.services import agent_set_paused
from runtime.models import RUN_AGENT_TASK, Run, RunStatus, RunTrigger
from tasks import services
from tasks.models import Task
from tasks.sweep import sweep_stale_queued
from tests.conftest import requires_postgres
from tests.factories import give_tasks
from tests.runtime.conftest import SYSTEM, drain, runs_of, triggers_of

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_created_for_a_managed_agent_queues_a_run(cast):
    task = cast.assign(cast.alex)
    (run,) = Run.objects.filter(agent=cast.alex)
    assert (run.status, run.trigger, run.task_id, run.organization_id) == (
        "queued",
        "created",
        task.pk,
        cast.org.pk,
    )
    assert triggers_of(run) == [("created", task.pk)]
    assert run.dispatched_at is not None


@pytest.mark.parametrize("kind", ["assigned", "delegated", "escalated"])
def test_assigned_delegated_and_escalated_work_wakes_its_agent(cast, kind):
    task = cast.assign(cast.alex, by=cast.actor(cast.alex))
    assert not Run.objects.exists()  # its own act: Alex took it himself
    if kind == "assigned":
        services.task_assign(task=task, actor=cast.by_human, to=cast.sarah)
        woken = cast.sarah
    elif kind == "delegated":
        services.task_delegate(task=task, actor=cast.actor(cast.alex), to=cast.sarah)
        woken = cast.sarah
    else:
        services.task_escalate(task=task, actor=cast.actor(cast.alex), reason="stuck")
        woken = cast.lena
    assert runs_of(woken) == [("queued", kind, task.pk)]
    assert Run.objects.count() == 1


def test_the_queue_refill_wakes_the_expert_it_gives_a_task(cast):
    held = give_tasks(cast.alex, 5)
    waiting = services.task_create(org=cast.org, actor=cast.actor(cast.sarah), title="wait")
    services.task_queue(task=waiting, actor=cast.actor(cast.sarah), to=cast.alex)
    assert not Run.objects.filter(agent=cast.alex).exists()  # queued: no room, no wake
    services.task_set_status(task=held[0], actor=cast.by_human, status="in_progress")
    services.task_cancel(task=held[0], actor=cast.by_human)
    assert runs_of(cast.alex) == [("queued", "auto_assigned", waiting.pk)]


def test_the_stale_sweep_escalation_wakes_the_senior(cast):
    give_tasks(cast.alex, 5)
    task = services.task_create(org=cast.org, actor=cast.actor(cast.sarah), title="old")
    services.task_queue(task=task, actor=cast.actor(cast.sarah), to=cast.alex)
    Task.objects.filter(pk=task.pk).update(queued_at=timezone.now() - timedelta(days=2))
    sweep_stale_queued()
    assert runs_of(cast.lena) == [("queued", "escalated", task.pk)]


def test_a_comment_by_someone_else_wakes_the_holder_and_the_delegator(cast):
    task = cast.assign(cast.alex, by=cast.actor(cast.lena))
    Run.objects.all().delete()
    services.task_comment(task=task, actor=cast.by_human, body="How is it going?")
    assert runs_of(cast.alex) == [("queued", "comment", task.pk)]
    assert runs_of(cast.lena) == [("queued", "comment", task.pk)]


def test_an_agents_own_comment_wakes_not_itself(cast):
    task = cast.assign(cast.alex)
    Run.objects.all().delete()
    services.task_comment(task=task, actor=cast.actor(cast.alex), body="On it.")
    assert not Run.objects.exists()


def test_managed_agents_answering_each_others_comments_stop_waking_each_other(cast, settings):
    """Lena (delegator) and Alex (holder), both managed, comment from inside their runs: each
    comment wakes the other until RUNTIME_MAX_AGENT_COMMENT_WAKES wakes this hour, then its
    wake-up is held (recorded, for a human to release); a human's comment still wakes them."""
    from runtime.services import current_run

    settings.RUNTIME_MAX_AGENT_COMMENT_WAKES = 3
    task = cast.assign(cast.alex, by=cast.actor(cast.lena))
    Run.objects.all().delete()
    speakers = [cast.lena, cast.alex] * 3
    for speaker in speakers:
        run = Run.objects.create(
            organization=cast.org, agent=speaker, trigger="comment", status="completed"
        )
        token = current_run.set(run.pk)
        try:
            services.task_comment(task=task, actor=cast.actor(speaker), body="Thanks!")
        finally:
            current_run.reset(token)
    woken = RunTrigger.objects.filter(task=task, trigger="comment", held="")
    assert woken.count() == 3
    held = RunTrigger.objects.filter(task=task, held="comments", run__isnull=True)
    assert held.count() == 3
    services.task_comment(task=task, actor=cast.by_human, body="Stop thanking, ship it.")
    assert woken.count() == 5  # the human's comment wakes both


def test_all_subtasks_finished_wakes_the_parents_holder(cast):
    parent = cast.assign(cast.lena, "p")
    sub = cast.assign(cast.alex, "s", by=cast.actor(cast.lena), parent=parent)
    Run.objects.all().delete()
    services.task_set_status(task=sub, actor=cast.actor(cast.alex), status="in_progress")
    services.task_set_status(task=sub, actor=cast.actor(cast.alex), status="completed", result="r")
    assert runs_of(cast.lena) == [("queued", "subtasks_done", parent.pk)]
    assert not Run.objects.filter(agent=cast.alex).exists()  # its own act


def test_an_external_agent_is_never_woken(cast):
    cast.assign(cast.morgan)
    assert not Run.objects.exists() and not RunTrigger.objects.exists()


def test_a_paused_agent_is_not_woken_and_resuming_it_wakes_it_with_what_waited(cast, offline):
    task = cast.assign(cast.alex)
    drain()  # Alex completes it; then he is paused and a comment arrives
    Run.objects.all().delete()
    fresh = cast.assign(cast.alex, "u")
    Run.objects.all().delete()
    RunTrigger.objects.all().delete()
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=True)
    services.task_comment(task=task, actor=cast.by_human, body="Thanks!")
    assert not Run.objects.exists()
    assert list(RunTrigger.objects.values_list("trigger", "task_id", "run")) == [
        ("comment", task.pk, None)
    ]
    agent_set_paused(agents=Agent.objects.filter(pk=cast.alex.pk), paused=False)
    (run,) = Run.objects.all()
    # What waited, then the task it holds and never started.
    assert (run.agent_id, run.trigger, run.task_id) == (cast.alex.pk, "comment", task.pk)
    assert triggers_of(run) == [("comment", task.pk), ("resumed", fresh.pk)]


def test_resuming_an_agent_with_nothing_waiting_starts_no_run(cast):
    agent_set_paused(agents=Agent.objects.filter(pk=cast.sam.pk), paused=False)
    assert not Run.objects.exists()


def test_a_trigger_joins_a_run_still_queued(cast):
    one = cast.assign(cast.alex, "1")
    two = cast.assign(cast.alex, "2")
    (run,) = Run.objects.all()
    assert triggers_of(run) == [("created", one.pk), ("created", two.pk)]


@requires_postgres()
@pytest.mark.postgres
def test_joining_a_queued_run_costs_two_statements_on_postgresql(cast):
    """The agent's row locked (with whether any budget exists), then its queued run locked and
    the trigger written with it: one statement each, the second after the lock (tests/runtime/
    test_race.py shows why they cannot be one)."""
    from runtime.services import current_run, run_wake

    one = cast.assign(cast.alex, "1")
    two = Task.objects.create(organization=cast.org, title="2", assignee=cast.alex)
    (run,) = Run.objects.all()
    reset = current_run.set(run.pk)  # as if the run's own move reached Alex
    try:
        with CaptureQueriesContext(connection) as sent:
            assert run_wake(agent=cast.alex, trigger="assigned", task=two).pk == run.pk
    finally:
        current_run.reset(reset)
    work = [
        q["sql"]
        for q in sent.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))
    ]
    assert len(work) == 2, work
    trigger = RunTrigger.objects.get(task=two)
    assert (trigger.run_id, trigger.trigger, trigger.woken_by_id) == (run.pk, "assigned", run.pk)
    assert trigger.created_at is not None and triggers_of(run)[0] == ("created", one.pk)


def test_triggers_during_a_run_make_exactly_one_follow_up(cast):
    first = cast.assign(cast.alex, "1")
    (run,) = Run.objects.all()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, lease_token="tok", heartbeat_at=timezone.now()
    )
    second = cast.assign(cast.alex, "2")
    services.task_comment(task=first, actor=cast.by_human, body="and this")
    third = cast.assign(cast.alex, "3")
    assert Run.objects.count() == 1
    assert RunTrigger.objects.filter(run__isnull=True).count() == 3

    from runtime.services import run_finish

    run_finish(run=run, token="tok", status=RunStatus.COMPLETED)
    follow_up = Run.objects.exclude(pk=run.pk).get()
    assert (follow_up.status, follow_up.previous_id, follow_up.trigger, follow_up.task_id) == (
        "queued",
        run.pk,
        "created",
        second.pk,
    )
    assert triggers_of(follow_up) == [
        ("created", second.pk),
        ("comment", first.pk),
        ("created", third.pk),
    ]
    assert not RunTrigger.objects.filter(run__isnull=True).exists()
    assert Run.objects.get(pk=run.pk).status == "completed"


def test_a_run_of_a_managed_agent_woken_by_another_run_says_which(cast, offline):
    cast.assign(cast.lena, "Index it", required_expertise="PostgreSQL")
    first, second = drain()
    assert Run.objects.get(pk=second).agent == cast.alex
    assert RunTrigger.objects.get(run_id=second).woken_by_id == first


def test_a_system_created_task_wakes_like_any_other(cast):
    task = cast.assign(cast.sarah, by=SYSTEM)
    assert runs_of(cast.sarah) == [("queued", "created", task.pk)]


def test_tasks_created_together_wake_their_agent_once_with_all_of_them(cast, monkeypatch):
    """The run goes to the workers only once every task of the transaction joined it: a worker
    quick to claim it would otherwise start with the first task and leave the rest to a
    follow-up run."""
    triggers_when_sent = []
    send = outbox._send

    def counting(message):
        if message.task_name == RUN_AGENT_TASK:
            triggers_when_sent.append(RunTrigger.objects.filter(run_id=message.args[0]).count())
        return send(message)

    monkeypatch.setattr(outbox, "_send", counting)
    with transaction.atomic():
        tasks = [cast.assign(cast.alex, f"t{n}") for n in range(3)]
    (run,) = Run.objects.filter(agent=cast.alex)
    assert triggers_of(run) == [("created", task.pk) for task in tasks]
    assert triggers_when_sent == [3]


class Undone(Exception):
    pass


def test_work_announced_in_an_undone_savepoint_wakes_nobody(cast):
    waiting = services.task_create(org=cast.org, actor=cast.by_human, title="unassigned")
    with transaction.atomic():
        kept = cast.assign(cast.alex, "kept")
        with pytest.raises(Undone), transaction.atomic():
            services.task_assign(task=waiting, actor=cast.by_human, to=cast.sarah)
            raise Undone
    assert runs_of(cast.alex) == [("queued", "created", kept.pk)]
    assert runs_of(cast.sarah) == []
    assert Task.objects.get(pk=waiting.pk).assignee is None
