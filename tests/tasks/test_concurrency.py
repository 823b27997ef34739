"""Rules under concurrency, on PostgreSQL: 50 threads, each with its own connection."""

from collections import Counter

import pytest

from organization.models import TeamRule
from tasks.models import HELD_STATUSES, Task, TaskEvent
from tasks.rules import SYSTEM
from tasks.services import task_create
from tasks.sweep import sweep_stale_queued
from tests.concurrency import run_at_once
from tests.conftest import KeyClient, requires_postgres
from tests.factories import give_tasks, make_agent, make_key, make_org

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 50


def post(key, path, body):
    def job():
        response = KeyClient(key).post(path, body, format="json")
        return response.status_code, response.json().get("code")

    return job


def test_fifty_assignments_to_one_agent_leave_exactly_capacity():
    org = make_org("race")
    target = make_agent(org, "agent-target")
    tasks = [task_create(org=org, actor=SYSTEM, title=f"t{n}") for n in range(THREADS)]
    key = make_key(org)
    results = run_at_once(
        [post(key, f"/api/tasks/{t.pk}/assign", {"agent_id": "agent-target"}) for t in tasks]
    )
    assert Counter(results) == {(200, None): 5, (409, "capacity_exceeded"): 45}
    assert Task.objects.filter(assignee=target, status__in=HELD_STATUSES).count() == 5


def test_fifty_agents_delegating_back_and_forth_never_make_a_cycle():
    org = make_org("loop")
    a, b = make_agent(org, "agent-a"), make_agent(org, "agent-b")
    key_a, key_b = make_key(org, a), make_key(org, b)
    task = task_create(org=org, actor=SYSTEM, title="ping-pong", assignee=a)
    other = task_create(org=org, actor=SYSTEM, title="pong-ping", assignee=b)
    # Each agent may see the other's task (it created it), so every answer is a 200 or a 409.
    Task.objects.filter(pk=task.pk).update(created_by_agent=b)
    Task.objects.filter(pk=other.pk).update(created_by_agent=a)
    jobs = []
    for n in range(THREADS):
        key, to, t = (key_a, "agent-b", task) if n % 2 else (key_b, "agent-a", task)
        if n % 5 == 0:
            key, to, t = (key_b, "agent-a", other) if n % 2 else (key_a, "agent-b", other)
        jobs.append(post(key, f"/api/tasks/{t.pk}/delegate", {"agent_id": to}))
    results = run_at_once(jobs)
    assert {status for status, _ in results} <= {200, 409}
    assert {code for status, code in results if status == 409} <= {
        "delegation_loop",
        "invalid_transition",
    }
    for t in (task, other):
        t.refresh_from_db()
        assert len(t.delegation_chain) == len(set(t.delegation_chain)) == 2
        assert TaskEvent.objects.filter(task=t, kind="delegated").count() == 1


def test_concurrent_completions_never_assign_one_queued_task_twice():
    org = make_org("drain")
    expert = make_agent(org, "agent-expert")
    held = give_tasks(expert, 5, status="in_progress")
    waiting = [task_create(org=org, actor=SYSTEM, title=f"w{n}") for n in range(10)]
    Task.objects.filter(pk__in=[t.pk for t in waiting]).update(queued_for=expert)
    key = make_key(org, expert)
    results = run_at_once(
        [post(key, f"/api/tasks/{t.pk}/status", {"status": "completed"}) for t in held]
    )
    assert Counter(results) == {(200, None): 5}
    assert Task.objects.filter(assignee=expert, status__in=HELD_STATUSES).count() == 5
    auto = Counter(TaskEvent.objects.filter(kind="auto_assigned").values_list("task_id", flat=True))
    assert len(auto) == 5 and set(auto.values()) == {1}


def test_two_sweeps_at_once_never_escalate_a_task_twice():
    org = make_org("sweep")
    boss = make_agent(org, "agent-boss")
    worker = make_agent(org, "agent-worker", senior=boss, workload_capacity=100)
    TeamRule.objects.create(organization=org)
    tasks = [task_create(org=org, actor=SYSTEM, title=f"s{n}") for n in range(60)]
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(
        queued_by=worker, queued_at="2000-01-01T00:00:00Z"
    )
    counts = run_at_once([lambda: sweep_stale_queued(batch_size=7).escalated for _ in range(4)])
    assert sum(counts) == 60
    per_task = Counter(TaskEvent.objects.filter(kind="escalated").values_list("task_id", flat=True))
    assert len(per_task) == 60 and set(per_task.values()) == {1}
    # The boss took five (its capacity); the rest wait in its queue.
    assert Task.objects.filter(assignee=boss).count() == 5
    assert Task.objects.filter(queued_for=boss, status="queued").count() == 55


def subtasks_in_progress(org, parent, count):
    """`count` subtasks of `parent`, each held in progress by its own agent; (task, key) pairs."""
    held = []
    for n in range(count):
        agent = make_agent(org, f"agent-part-{n}")
        child = Task.objects.create(
            organization=org, title=f"part {n}", parent=parent, status="in_progress", assignee=agent
        )
        held.append((child, make_key(org, agent)))
    return held


def test_subtasks_finishing_at_once_tell_the_parent_exactly_once():
    """Issue 11 §1: the last open subtask tells the parent's holder — whichever it is, once."""
    org = make_org("fanout")
    lead = make_agent(org, "agent-lead")
    parent = task_create(org=org, actor=SYSTEM, title="the whole", assignee=lead)
    held = subtasks_in_progress(org, parent, 20)
    results = run_at_once(
        [post(key, f"/api/tasks/{t.pk}/status", {"status": "completed"}) for t, key in held]
    )
    assert Counter(results) == {(200, None): 20}
    assert TaskEvent.objects.filter(task=parent, kind="subtasks_done").count() == 1
    assert lead.inbox_items.filter(kind="subtasks_done").count() == 1


def test_cancelling_a_parent_while_its_subtasks_finish_never_deadlocks():
    """The cascade locks the parent, then its subtasks; a finishing subtask locks its parent
    first too (pk order): every request answers, and every subtask ends finished."""
    org = make_org("cascade")
    parent = task_create(org=org, actor=SYSTEM, title="the whole")
    held = subtasks_in_progress(org, parent, 10)
    human = make_key(org)
    jobs = [post(key, f"/api/tasks/{t.pk}/status", {"status": "completed"}) for t, key in held]
    jobs.append(post(human, f"/api/tasks/{parent.pk}/cancel", {"cancel_subtasks": True}))
    results = run_at_once(jobs)
    assert results[-1] == (200, None)
    assert set(results[:-1]) <= {(200, None), (409, "invalid_transition")}
    statuses = Counter(Task.objects.filter(parent=parent).values_list("status", flat=True))
    assert statuses["completed"] == Counter(results[:-1])[(200, None)]
    assert sum(statuses.values()) == 10 and set(statuses) <= {"completed", "cancelled"}
    # The parent hears its subtasks are done only if they all finished before it was cancelled.
    told = TaskEvent.objects.filter(task=parent, kind="subtasks_done").count()
    assert told == (1 if statuses["completed"] == 10 else 0)
