"""Moves racing the changes they must see, on PostgreSQL: each side on its own connection.

Rule 3 (offline agents receive nothing) and rule 2 (capacity) are read from the agent's row as
the move locks it, never from the agent as read before the lock; rule 5 (a queue is refilled
when its expert has room) holds when the refill had to skip a queued task another move held.

A test holds one side in an open transaction (an Event releases it), starts the other, waits
until PostgreSQL shows it waiting on a lock, then lets the first commit.
"""

import threading
import time
from collections import Counter

import pytest
from django.db import connection, transaction

from infrastructure.errors import Conflict
from organization.caller import Caller
from organization.models import Agent, TeamRule
from organization.services import agent_delete, agent_set_paused
from tasks.models import HELD_STATUSES, ActorKind, InboxItem, Task, TaskStatus
from tasks.rules import SYSTEM, Actor, lock_agents
from tasks.services import (
    task_assign,
    task_comment,
    task_create,
    task_escalate,
    task_set_status,
)
from tests.concurrency import run_at_once
from tests.conftest import KeyClient, requires_postgres
from tests.factories import give_tasks, make_admin_user, make_agent, make_key, make_org

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DEADLINE = 15  # seconds: a side that has not got this far by then never will
HUMAN = Actor(ActorKind.USER, "boss")


class Side:
    """`job` run in a thread of its own (its own connection): its answer, or what it raised."""

    def __init__(self, job):
        self.answer = None
        self.thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self.thread.start()

    def _run(self, job):
        try:
            self.answer = job()
        except Exception as exc:  # noqa: BLE001  (the test asserts on it)
            self.answer = exc
        finally:
            connection.close()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def result(self):
        self.thread.join(DEADLINE)
        assert self.done(), "the side never finished (a deadlock, or a lock never released)"
        return self.answer


def lock_waiters() -> int:
    """How many sessions of this test's database wait on a lock (one per xdist worker's db)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)  # polling a condition, not waiting for work to be done


def holding(work):
    """A side that does `work` in a transaction and keeps it open (its row locks held) until
    `release` is set; `ready` is set once `work` is done."""
    ready, release = threading.Event(), threading.Event()

    def job():
        with transaction.atomic():
            work()
            ready.set()
            assert release.wait(DEADLINE), "never released"

    side = Side(job)
    assert ready.wait(DEADLINE), "the holding side never got its locks"
    return side, release


def pausing(agent):
    return holding(lambda: agent_set_paused(agents=Agent.objects.filter(pk=agent.pk), paused=True))


def held_by(agent) -> int:
    return Task.objects.filter(assignee=agent, status__in=HELD_STATUSES).count()


# --- rule 3: a pause that commits while the move waits for the agent's lock ------------------


def test_a_task_created_for_an_agent_being_paused_is_refused():
    """REST reads the agent before the service locks it; the paused flag is the locked row's."""
    org = make_org("pause-create")
    target = make_agent(org, "agent-target")
    key = make_key(org)
    pause, release = pausing(target)

    def create():
        response = KeyClient(key).post(
            "/api/tasks", {"title": "x", "agent_id": "agent-target"}, format="json"
        )
        return response.status_code, response.json().get("code")

    creating = Side(create)
    wait_until(lambda: lock_waiters() >= 1, "the creation waits for the agent's lock")
    release.set()
    pause.result()
    assert creating.result() == (409, "agent_offline")
    assert held_by(target) == 0


def test_an_assignment_to_an_agent_being_paused_is_refused():
    """The service given the agent itself (tools, admin) locks it and reads it again."""
    org = make_org("pause-assign")
    target = make_agent(org, "agent-target")
    task = task_create(org=org, actor=SYSTEM, title="x")
    pause, release = pausing(target)
    assigning = Side(lambda: task_assign(task=Task(pk=task.pk), actor=HUMAN, to=target))
    wait_until(lambda: lock_waiters() >= 1, "the assignment waits for the agent's lock")
    release.set()
    pause.result()
    answer = assigning.result()
    assert isinstance(answer, Conflict) and answer.code == "agent_offline", answer
    assert held_by(target) == 0


def test_an_assignment_to_an_agent_whose_capacity_is_being_lowered_is_refused():
    org = make_org("capacity")
    target = make_agent(org, "agent-target")
    give_tasks(target, 3)
    task = task_create(org=org, actor=SYSTEM, title="x")
    lowering, release = holding(
        lambda: Agent.objects.filter(pk=target.pk).update(workload_capacity=3)
    )
    assigning = Side(lambda: task_assign(task=Task(pk=task.pk), actor=HUMAN, to=target))
    wait_until(lambda: lock_waiters() >= 1, "the assignment waits for the agent's lock")
    release.set()
    lowering.result()
    answer = assigning.result()
    assert isinstance(answer, Conflict) and answer.code == "capacity_exceeded", answer
    assert held_by(target) == 3


def test_an_escalation_passes_over_a_senior_being_paused():
    """The senior is read before the lock (it is the escalating agent's); paused meanwhile, the
    task goes to the next in line, the default supervisor."""
    org = make_org("pause-escalate")
    senior = make_agent(org, "agent-senior")
    supervisor = make_agent(org, "agent-supervisor")
    TeamRule.objects.create(organization=org, default_supervisor=supervisor)
    worker = make_agent(org, "agent-worker", senior=senior)
    task = give_tasks(worker, 1)[0]
    pause, release = pausing(senior)
    actor = Actor(ActorKind.AGENT, worker.handle, agent=Agent.objects.get(pk=worker.pk))
    escalating = Side(lambda: task_escalate(task=Task(pk=task.pk), actor=actor, reason="stuck"))
    wait_until(lambda: lock_waiters() >= 1, "the escalation waits for the senior's lock")
    release.set()
    pause.result()
    assert not isinstance(escalating.result(), Exception), escalating.answer
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (TaskStatus.ASSIGNED, supervisor.pk)
    assert held_by(senior) == 0


def test_a_refill_gives_nothing_to_an_expert_being_paused():
    """Completing a task locks its holder and refills its queue: paused meanwhile, the holder
    (read with the task, before its lock) receives none of it."""
    org = make_org("pause-refill")
    expert = make_agent(org, "agent-expert")
    done = give_tasks(expert, 5, status=TaskStatus.IN_PROGRESS)[0]
    waiting = task_create(org=org, actor=SYSTEM, title="waits for the expert")
    Task.objects.filter(pk=waiting.pk).update(queued_for=expert)
    pause, release = pausing(expert)
    actor = Actor(ActorKind.AGENT, expert.handle, agent=expert)
    completing = Side(
        lambda: task_set_status(task=Task(pk=done.pk), actor=actor, status=TaskStatus.COMPLETED)
    )
    wait_until(lambda: lock_waiters() >= 1, "the completion waits for the expert's lock")
    release.set()
    pause.result()
    assert not isinstance(completing.result(), Exception), completing.answer
    waiting.refresh_from_db()
    assert (waiting.status, waiting.assignee_id) == (TaskStatus.QUEUED, None)
    assert held_by(expert) == 4


# --- rule 5: a refill that skipped a queued task another move held ---------------------------


def completes_one(expert):
    """A side: the expert completes one of its tasks (its queue is refilled in that move)."""
    task = Task.objects.filter(assignee=expert, status=TaskStatus.IN_PROGRESS).first()
    actor = Actor(ActorKind.AGENT, expert.handle, agent=expert)
    return Side(
        lambda: task_set_status(task=Task(pk=task.pk), actor=actor, status=TaskStatus.COMPLETED)
    )


def test_a_queued_task_held_by_a_move_that_fails_still_reaches_its_expert():
    """A human assigns the queued task to a full agent: the move locks the task, waits for the
    agent's lock, and is refused. The expert's refill, meanwhile, skipped the locked task; once
    the move is over the expert, with room, gets it."""
    org = make_org("strand-fail")
    expert = make_agent(org, "agent-expert")
    other = make_agent(org, "agent-other")
    give_tasks(expert, 5, status=TaskStatus.IN_PROGRESS)
    give_tasks(other, 5, status=TaskStatus.IN_PROGRESS)
    waiting = task_create(org=org, actor=SYSTEM, title="waits for the expert")
    Task.objects.filter(pk=waiting.pk).update(queued_for=expert)

    busy, release = holding(lambda: lock_agents([other.pk]))  # any move on `other` in flight
    assigning = Side(lambda: task_assign(task=Task(pk=waiting.pk), actor=HUMAN, to=other))
    wait_until(lambda: lock_waiters() >= 1, "the assignment holds the task, waits for `other`")
    completing = completes_one(expert)
    # Fixed, the completion's refill waits (after its commit) for the task the assignment holds.
    wait_until(lambda: completing.done() or lock_waiters() >= 2, "the completion's refill")
    release.set()
    busy.result()
    answer = assigning.result()
    assert isinstance(answer, Conflict) and answer.code == "capacity_exceeded", answer
    assert not isinstance(completing.result(), Exception), completing.answer
    waiting.refresh_from_db()
    assert (waiting.status, waiting.assignee_id, held_by(expert)) == (
        TaskStatus.ASSIGNED,
        expert.pk,
        5,
    ), f"stranded: {waiting.status} for {waiting.queued_for_id}; expert holds {held_by(expert)}"


def test_a_queued_task_locked_as_a_parent_still_reaches_its_expert():
    """A subtask finishing locks its parent, here a task queued for the expert, and the move
    succeeds: the parent stays queued. Skipped by the expert's refill meanwhile, it is given to
    the expert once the subtask's move is over."""
    org = make_org("strand-parent")
    expert = make_agent(org, "agent-expert")
    helper = make_agent(org, "agent-helper")
    give_tasks(expert, 5, status=TaskStatus.IN_PROGRESS)
    parent = task_create(org=org, actor=SYSTEM, title="waits for the expert")
    Task.objects.filter(pk=parent.pk).update(queued_for=expert)
    part = task_create(org=org, actor=SYSTEM, title="a part", assignee=helper, parent=parent)
    Task.objects.filter(pk=part.pk).update(status=TaskStatus.IN_PROGRESS)

    busy, release = holding(lambda: lock_agents([helper.pk]))
    finishing = completes_one(helper)  # locks the part and its parent, waits for the helper
    wait_until(lambda: lock_waiters() >= 1, "the part's completion holds the parent")
    completing = completes_one(expert)
    wait_until(lambda: completing.done() or lock_waiters() >= 2, "the completion's refill")
    release.set()
    busy.result()
    assert not isinstance(finishing.result(), Exception), finishing.answer
    assert not isinstance(completing.result(), Exception), completing.answer
    parent.refresh_from_db()
    assert (parent.status, parent.assignee_id, held_by(expert)) == (
        TaskStatus.ASSIGNED,
        expert.pk,
        5,
    ), f"stranded: {parent.status} for {parent.queued_for_id}; expert holds {held_by(expert)}"


def test_completions_and_failing_assignments_at_once_leave_no_room_beside_a_queue():
    """Many moves at once on an expert's queue (completions, and assignments of its queued tasks
    to a full agent, refused): every request answers (no deadlock), and the expert ends full,
    its queue refilled into every slot that came free."""
    org = make_org("strand-many")
    expert = make_agent(org, "agent-expert")
    other = make_agent(org, "agent-other")
    held = give_tasks(expert, 5, status=TaskStatus.IN_PROGRESS)
    give_tasks(other, 5, status=TaskStatus.IN_PROGRESS)
    waiting = [task_create(org=org, actor=SYSTEM, title=f"w{n}") for n in range(8)]
    Task.objects.filter(pk__in=[t.pk for t in waiting]).update(queued_for=expert)
    expert_key, human = make_key(org, expert), make_key(org)

    def post(key, path, body):
        def job():
            response = KeyClient(key).post(path, body, format="json")
            return response.status_code, response.json().get("code")

        return job

    jobs = [post(expert_key, f"/api/tasks/{t.pk}/status", {"status": "completed"}) for t in held]
    jobs += [post(human, f"/api/tasks/{t.pk}/assign", {"agent_id": "agent-other"}) for t in waiting]
    results = run_at_once(jobs)
    assert Counter(results[:5]) == {(200, None): 5}
    assert set(results[5:]) <= {(409, "capacity_exceeded"), (409, "invalid_transition")}
    assert held_by(expert) == 5
    assert Task.objects.filter(queued_for=expert, status=TaskStatus.QUEUED).count() == 3


def test_the_stale_sweep_does_not_escalate_to_a_senior_being_paused():
    """The sweep reads its targets before it locks them: the paused flag is the locked row's, so
    the row is skipped (reported) and the next sweep escalates it elsewhere."""
    from datetime import timedelta

    from django.utils import timezone

    from tasks.sweep import sweep_stale_queued

    org = make_org("pause-sweep")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss)
    expert = make_agent(org, "agent-expert")
    task = task_create(org=org, actor=SYSTEM, title="stale")
    Task.objects.filter(pk=task.pk).update(
        status=TaskStatus.QUEUED,
        queued_for=expert,
        queued_by=worker,
        queued_at=timezone.now() - timedelta(days=2),
    )
    pause, release = pausing(boss)
    sweeping = Side(sweep_stale_queued)
    wait_until(lambda: lock_waiters() >= 1, "the sweep waits for the senior's lock")
    release.set()
    pause.result()
    result = sweeping.result()
    assert not isinstance(result, Exception), result
    assert (result.escalated, result.skipped) == (0, [task.pk])
    assert held_by(boss) == 0
    assert Task.objects.get(pk=task.pk).status == TaskStatus.QUEUED


# --- deleting an agent while a move tells it of a task it created --------------------------


def delete_during_move(org, task, leaving, move) -> tuple:
    """`move()` runs holding `task`'s lock while `leaving` is deleted: the deletion must wait
    for it (not deadlock). Returns (the move's answer, the deletion's)."""
    ready, go = threading.Event(), threading.Event()

    def held_then_moved():
        with transaction.atomic():
            list(Task.objects.select_for_update().filter(pk=task.pk))
            ready.set()
            assert go.wait(DEADLINE), "never let go"
            move()
        return InboxItem.objects.filter(agent=leaving, task=task).exists()

    moving = Side(held_then_moved)
    assert ready.wait(DEADLINE)
    human = Caller(organization=org, user=make_admin_user(org))
    deleting = Side(lambda: agent_delete(caller=human, agent=Agent.objects.get(pk=leaving.pk)))
    wait_until(lambda: lock_waiters() >= 1, "the deletion waits for the task's lock")
    go.set()
    moved, deleted = moving.result(), deleting.result()
    assert not isinstance(deleted, Exception), deleted
    assert not Agent.objects.filter(pk=leaving.pk).exists()
    task.refresh_from_db()
    return moved


def test_deleting_an_agent_waits_for_a_move_on_a_task_it_created_without_deadlock():
    """The deletion clears the task's pointer to its creator; a move holding that task tells the
    creator (an inbox item: a key share on the agent's row). The deletion locks the task before
    the agent, as moves do, so the two queue one behind the other instead of deadlocking."""
    org = make_org("leaving")
    creator = make_agent(org, "agent-creator")
    holder = make_agent(org, "agent-holder")
    task = task_create(
        org=org,
        actor=Actor(ActorKind.AGENT, creator.handle, agent=creator),
        title="x",
        assignee=holder,
    )
    actor = Actor(ActorKind.AGENT, holder.handle, agent=holder)
    task_set_status(task=Task(pk=task.pk), actor=actor, status=TaskStatus.IN_PROGRESS)
    told = delete_during_move(
        org,
        task,
        creator,
        lambda: task_set_status(task=Task(pk=task.pk), actor=actor, status=TaskStatus.COMPLETED),
    )
    assert told is True  # the creator was told before it left
    assert (task.status, task.created_by_agent_id) == (TaskStatus.COMPLETED, None)


def test_deleting_the_agent_that_queued_a_task_does_not_deadlock_with_a_comment_on_it():
    """`queued_by` is such a pointer too: the agent that passed a task to an expert whose queue
    was full is told of a comment on it (its delegator)."""
    org = make_org("leaving-queuer")
    queuer = make_agent(org, "agent-queuer")
    expert = make_agent(org, "agent-expert")
    task = task_create(org=org, actor=HUMAN, title="x", assignee=queuer)
    # The queuer passed it on to the expert, whose queue was full: it waits, queued by the
    # queuer (as services.changes.wait_for leaves it). The queuer holds nothing any more.
    Task.objects.filter(pk=task.pk).update(
        status=TaskStatus.QUEUED,
        assignee=None,
        queued_for=expert,
        queued_by=queuer,
        delegation_chain=[queuer.handle, expert.handle],
    )
    commented = delete_during_move(
        org,
        task,
        queuer,
        lambda: task_comment(task=Task.objects.get(pk=task.pk), actor=HUMAN, body="Any news?"),
    )
    assert not isinstance(commented, Exception), commented
    assert task.queued_by_id is None


def test_a_supervisor_demoted_while_named_default_supervisor_does_not_stay_default():
    """The default supervisor holds the supervisor role (seed 003): naming one waits for a
    demotion of that agent under way, and then refuses it; it never keeps a worker as default."""
    from infrastructure.errors import Invalid
    from organization import hierarchy
    from organization.models import AgentRole, HierarchyRole

    org = make_org("race")
    make_agent(org, "agent-alice", hierarchy_role=HierarchyRole.SUPERVISOR)
    human = Caller(organization=org)
    release, demoted = threading.Event(), threading.Event()

    def demote_and_hold():
        with transaction.atomic():
            hierarchy.role_set(caller=human, data={"agent_id": "agent-alice", "role": "worker"})
            demoted.set()  # written, its locks held until `release`
            release.wait(DEADLINE)

    demotion = Side(demote_and_hold)
    wait_until(lambda: demoted.is_set() or demotion.done(), "the demotion under way")
    assert not demotion.done(), demotion.result()
    assert AgentRole.objects.filter(role=HierarchyRole.SUPERVISOR).exists()  # not committed
    naming = Side(
        lambda: hierarchy.rules_set(
            caller=human, data={"default_supervisor_agent_id": "agent-alice"}
        )
    )
    wait_until(lambda: lock_waiters() >= 1 or naming.done(), "the naming waiting or done")
    release.set()
    assert demotion.result() is None
    answer = naming.result()
    assert isinstance(answer, Invalid) and answer.code == "not_a_supervisor", answer
    assert not TeamRule.objects.filter(organization=org, default_supervisor__isnull=False).exists()
