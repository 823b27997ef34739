"""An occurrence creates its task as any task is created — routed by the recommendation inside the
owning team, or given to the owning agent — under the routine's concurrency; its history is
listed newest first."""

from datetime import timedelta

import pytest
from django.utils import timezone

from organization.models import Agent
from organization.services import agent_set_paused
from routines import services
from routines.models import Occurrence, Routine
from runtime.models import Run
from tasks.models import ApprovalPolicy, HumanDecision, Task, TaskStatus
from tests.factories import give_tasks, make_agent

from .conftest import assert_error

pytestmark = pytest.mark.django_db


def finish(task_id: int) -> None:
    Task.objects.filter(pk=task_id).update(status=TaskStatus.COMPLETED)


def test_a_team_routine_goes_to_the_teams_expert_the_recommendation_names(cast):
    # Olga of Ops holds PostgreSQL too and is idle: across teams she would be chosen first.
    make_agent(cast.org, "agent-olga", team=cast.morgan.team, expertise=["PostgreSQL"])
    give_tasks(cast.alex, 1)
    made = cast.routine(title="Review for {date}", description="Due {date}")

    response = cast.run(made)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["outcome"] == "created" and body["reason"] == ""
    task = Task.objects.get(pk=body["task"])
    today = timezone.now().date().isoformat()
    assert (task.title, task.description) == (f"Review for {today}", f"Due {today}")
    assert task.assignee == cast.alex and task.status == TaskStatus.ASSIGNED
    assert task.required_expertise == "PostgreSQL"
    assert task.events.get(kind="created").actor_label == f"routine:{made['id']}"


def test_only_date_is_replaced_in_the_templates_other_braces_stay_as_written(cast):
    # No str.format on what a human wrote: "{0}", "{x}" or an attribute lookup neither crash
    # nor read anything out.
    title = "{0} {x} {date.__class__} {{date}} {date"
    made = cast.routine(title=title, description="{__import__} {date} {}")
    task = Task.objects.get(pk=cast.run(made).json()["task"])
    today = timezone.now().date().isoformat()
    assert task.title == "{0} {x} {date.__class__} {" + today + "} {date"
    assert task.description == "{__import__} " + today + " {}"


def test_a_team_routine_passes_over_a_teammate_a_budget_holds_back(cast):
    # Alex (managed, PostgreSQL) has spent his budget; Dana, in Development too, has room.
    from costs.models import Budget
    from costs.periods import current_period

    dana = make_agent(cast.org, "agent-dana", team=cast.alex.team, expertise=["PostgreSQL"])
    give_tasks(dana, 2)  # busier than Alex: chosen only because he is held
    Budget.objects.create(
        organization=cast.org,
        scope="agent",
        agent=cast.alex,
        limit_usd=1,
        spent_usd=1,
        period=current_period(),
    )
    task_id = cast.run(cast.routine()).json()["task"]
    assert Task.objects.get(pk=task_id).assignee == dana


def test_a_team_routine_queues_for_its_busy_expert(cast):
    cast.alex.workload_capacity = 1
    cast.alex.save()
    give_tasks(cast.alex, 1)
    task_id = cast.run(cast.routine()).json()["task"]
    task = Task.objects.get(pk=task_id)
    assert (task.status, task.queued_for, task.assignee) == (TaskStatus.QUEUED, cast.alex, None)


def test_a_team_routine_nobody_in_the_team_can_take_is_escalated(cast):
    # Morgan of Ops holds Redis; Development has no Redis expert: escalated, not sent to Ops.
    task_id = cast.run(cast.routine(required_expertise="Redis")).json()["task"]
    task = Task.objects.get(pk=task_id)
    assert task.status == TaskStatus.ESCALATED and task.assignee != cast.morgan


def test_an_agent_routine_is_given_to_its_agent_or_queued_for_it_when_full(cast):
    made = cast.routine(agent="agent-sarah", concurrency="allow")
    first = Task.objects.get(pk=cast.run(made).json()["task"])
    assert (first.assignee, first.status) == (cast.sarah, TaskStatus.ASSIGNED)

    give_tasks(cast.sarah, cast.sarah.workload_capacity)
    second = Task.objects.get(pk=cast.run(made).json()["task"])
    assert (second.queued_for, second.status) == (cast.sarah, TaskStatus.QUEUED)


def test_a_rule_that_refuses_the_task_makes_a_skipped_occurrence(cast):
    made = cast.routine(agent="agent-sam")  # paused
    response = cast.run(made)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["outcome"], body["task"]) == ("skipped", None)
    assert body["reason"].startswith("agent_offline:")
    assert not Task.objects.exists()


def test_an_approval_policy_holds_the_occurrences_task_for_a_human(cast):
    ApprovalPolicy.objects.create(
        organization=cast.org, name="Critical waits", trigger="urgency", urgencies=["critical"]
    )
    cast.org.has_approval_policies = True
    cast.org.save()
    response = cast.run(cast.routine(urgency="critical"))
    body = response.json()
    assert body["outcome"] == "skipped" and body["task"] is None
    decision = HumanDecision.objects.get()
    assert (
        body["reason"] == f"awaiting_approval: decision {decision.pk} waits for a human's approval"
    )
    assert decision.action["name"] == "create_task"
    assert not Task.objects.exists()


def test_the_approved_decision_creates_the_task(cast):
    ApprovalPolicy.objects.create(
        organization=cast.org, name="Critical waits", trigger="urgency", urgencies=["critical"]
    )
    cast.org.has_approval_policies = True
    cast.org.save()
    cast.run(cast.routine(urgency="critical"))
    decision = HumanDecision.objects.get()
    response = cast.client.post(f"/api/decisions/{decision.pk}/approve", {}, format="json")
    assert response.status_code == 200, response.content
    assert Task.objects.get().assignee == cast.alex


def test_a_scheduled_occurrence_held_for_approval_creates_its_task_as_the_system(cast):
    ApprovalPolicy.objects.create(
        organization=cast.org, name="Critical waits", trigger="urgency", urgencies=["critical"]
    )
    cast.org.has_approval_policies = True
    cast.org.save()
    made = cast.routine(urgency="critical", interval_seconds=60)
    Routine.objects.filter(pk=made["id"]).update(next_run_at=timezone.now())
    assert services.routine_tick(routine_id=made["id"]).outcome == "skipped"
    decision = HumanDecision.objects.get()
    assert decision.requester_label == f"routine:{made['id']}"

    response = cast.client.post(f"/api/decisions/{decision.pk}/approve", {}, format="json")
    assert response.status_code == 200, response.content
    task = Task.objects.get()
    assert task.assignee == cast.alex
    assert task.events.get(kind="created").actor_label == "system"


def test_a_managed_agent_is_woken_by_its_routines_task(cast, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        task_id = cast.run(cast.routine(agent="agent-alex")).json()["task"]
    (run,) = Run.objects.filter(agent=cast.alex)
    assert (run.trigger, run.task_id) == ("created", task_id)


def test_skip_refuses_a_run_while_the_last_occurrence_is_open(cast):
    made = cast.routine()
    first = cast.run(made).json()
    assert_error(cast.run(made), 409, "routine_busy")
    assert len(cast.occurrences(made)) == 1

    finish(first["task"])
    assert cast.run(made).json()["outcome"] == "created"


def test_skip_on_the_schedule_records_the_skipped_occurrence(cast):
    made = cast.routine(interval_seconds=60)
    routine = Routine.objects.get(pk=made["id"])
    open_task = cast.run(made).json()["task"]
    services.routine_tick(routine_id=routine.pk, expires=None)  # not due yet: nothing
    routine.next_run_at = timezone.now()
    routine.save()
    assert services.routine_tick(routine_id=routine.pk).outcome == "skipped"
    (last, _) = cast.occurrences(made)
    assert last["reason"] == f"routine_busy: the last occurrence's task {open_task} is still open"


def test_allow_creates_a_task_at_each_occurrence(cast):
    made = cast.routine(concurrency="allow")
    tasks = {cast.run(made).json()["task"] for _ in range(3)}
    assert len(tasks) == 3 and None not in tasks


def test_queue_holds_an_occurrence_until_the_open_one_finishes(cast):
    made = cast.routine(concurrency="queue")
    first = cast.run(made).json()["task"]

    held = cast.run(made)
    assert held.status_code == 202, held.content
    assert (held.json()["outcome"], held.json()["task"]) == ("held", None)
    assert [o["task"] for o in cast.occurrences(made)] == [first]  # held ones are not listed

    services.routines_sweep()  # the first is still open: still held
    assert Occurrence.objects.filter(outcome="held").count() == 1

    finish(first)
    services.routines_sweep()
    newest, oldest = cast.occurrences(made)
    assert newest["outcome"] == "created" and newest["task"] not in (None, first)
    assert oldest["task"] == first


def test_queue_waits_for_the_task_created_last_whatever_its_occurrences_date(cast):
    made = cast.routine(concurrency="queue", interval_seconds=60)
    first = cast.run(made).json()["task"]
    # A tick the beat sent just before that run, taken after it: held, dated before it.
    routine = Routine.objects.get(pk=made["id"])
    sent = Occurrence.objects.get().at - timedelta(seconds=2)
    Routine.objects.filter(pk=routine.pk).update(next_run_at=sent)
    expires = sent + timedelta(seconds=routine.periodic_task.expire_seconds)
    assert services.routine_tick(routine_id=routine.pk, expires=expires).outcome == "held"
    finish(first)
    services.routines_sweep()
    released = Occurrence.objects.get(at=sent)
    assert released.outcome == "created" and released.task.status == TaskStatus.ASSIGNED

    response = cast.run(made)
    assert response.status_code == 202, response.content
    assert response.json()["outcome"] == "held"


def test_a_disabled_routine_keeps_its_held_occurrences_until_enabled_again(cast):
    made = cast.routine(concurrency="queue")
    first = cast.run(made).json()["task"]
    assert cast.run(made).status_code == 202
    url = f"/api/routines/{made['id']}"
    assert cast.client.patch(url, {"enabled": False}, format="json").status_code == 200
    finish(first)
    services.routines_sweep()
    assert Task.objects.count() == 1  # disabled: it is not swept, nothing is created

    assert cast.client.patch(url, {"enabled": True}, format="json").status_code == 200
    services.routines_sweep()
    assert Task.objects.count() == 2 and not Occurrence.objects.filter(outcome="held").exists()


def test_queue_holds_at_most_ten(cast):
    made = cast.routine(concurrency="queue")
    cast.run(made)
    answers = [cast.run(made).json() for _ in range(services.MAX_HELD + 1)]
    assert [a["outcome"] for a in answers] == ["held"] * services.MAX_HELD + ["skipped"]
    assert answers[-1]["reason"] == "queue_full: 10 occurrences wait already"


def test_the_history_is_newest_first(cast):
    made = cast.routine(concurrency="allow")
    routine = Routine.objects.get(pk=made["id"])
    now = timezone.now()
    for minutes, outcome in ((3, "created"), (1, "skipped"), (2, "created")):
        Occurrence.objects.create(
            routine=routine, at=now - timedelta(minutes=minutes), outcome=outcome, source="run"
        )
    history = cast.occurrences(made)
    assert [h["at"] for h in history] == sorted((h["at"] for h in history), reverse=True)
    assert list(history[0]) == ["at", "outcome", "task", "reason"]
    assert cast.client.get(f"/api/routines/{made['id']}").json()["last_occurrence"] == history[0]


def test_a_paused_owner_resumed_gets_the_next_occurrence(cast):
    made = cast.routine(agent="agent-sam", concurrency="allow")
    assert cast.run(made).json()["outcome"] == "skipped"
    agent_set_paused(agents=Agent.objects.filter(pk=cast.sam.pk), paused=False)
    assert cast.run(made).json()["outcome"] == "created"


def test_the_tasks_of_a_deleted_routine_stay(cast):
    made = cast.routine()
    task_id = cast.run(made).json()["task"]
    cast.client.delete(f"/api/routines/{made['id']}")
    assert Task.objects.filter(pk=task_id).exists()


def test_the_history_keeps_the_newest_occurrences_and_what_the_concurrency_waits_on(cast, settings):
    settings.ROUTINES_OCCURRENCES_KEPT = 10
    made = cast.routine(concurrency="allow")
    tasks = [cast.run(made).json()["task"] for _ in range(12)]
    assert [o["task"] for o in cast.occurrences(made)] == tasks[::-1][:10]

    # A queue routine: its open task's occurrence, ten held, then skipped ones (queue_full). The
    # oldest skipped go; the held and the one whose task they wait on stay.
    queued = cast.routine(concurrency="queue")
    first = cast.run(queued).json()["task"]
    for _ in range(24):
        cast.run(queued)
    routine = Routine.objects.get(pk=queued["id"])
    rows = list(routine.occurrences.order_by("pk").values_list("outcome", "task_id"))
    assert rows == [("created", first)] + [("held", None)] * 10 + [("skipped", None)] * 10

    finish(first)
    services.routines_sweep()
    assert routine.occurrences.filter(outcome="held").count() == 9
    now_open = services.open_task(routine)
    assert now_open is not None and now_open.pk != first
