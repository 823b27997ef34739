"""Deleting an agent locks every task whose pointer to it the deletion clears (`queued_by`
too: the agent that queued a task for an expert) before it locks the agent: a move holding such
a task, which tells the agent (its delegator: an inbox item, a key share on the agent's row),
would otherwise deadlock with the deletion."""

import threading

import pytest
from django.db import transaction

from organization.caller import Caller
from organization.models import Agent
from organization.services import agent_delete
from tasks.models import ActorKind, InboxItem, Task, TaskStatus
from tasks.rules import Actor
from tasks.services import task_comment, task_create
from tests.conftest import requires_postgres
from tests.factories import make_admin_user, make_agent, make_org
from tests.tasks.test_lock_races import DEADLINE, Side, lock_waiters, wait_until

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HUMAN = Actor(ActorKind.USER, "boss")


def test_deleting_the_agent_that_queued_a_task_does_not_deadlock_with_a_comment_on_it():
    org = make_org("leaving-queuer")
    queuer = make_agent(org, "agent-queuer")
    expert = make_agent(org, "agent-expert")
    task = task_create(org=org, actor=HUMAN, title="x", assignee=queuer)
    # The queuer passed it on to the expert, whose queue was full: it waits, queued by the
    # queuer (as services._wait_for leaves it). The queuer holds nothing any more.
    Task.objects.filter(pk=task.pk).update(
        status=TaskStatus.QUEUED, assignee=None, queued_for=expert, queued_by=queuer,
        delegation_chain=[queuer.handle, expert.handle],
    )  # fmt: skip
    ready, go = threading.Event(), threading.Event()

    def comment():
        with transaction.atomic():
            list(Task.objects.select_for_update().filter(pk=task.pk))
            ready.set()
            assert go.wait(DEADLINE), "never let go"
            task_comment(task=Task.objects.get(pk=task.pk), actor=HUMAN, body="Any news?")
        return InboxItem.objects.filter(agent=queuer, task=task).exists()

    commenting = Side(comment)
    assert ready.wait(DEADLINE)
    human = Caller(organization=org, user=make_admin_user(org))
    deleting = Side(lambda: agent_delete(caller=human, agent=Agent.objects.get(pk=queuer.pk)))
    wait_until(lambda: lock_waiters() >= 1, "the deletion waits for the task's lock")
    go.set()
    commented, deleted = commenting.result(), deleting.result()
    assert not isinstance(commented, Exception), commented
    assert not isinstance(deleted, Exception), deleted
    task.refresh_from_db()
    assert task.queued_by_id is None
    assert not Agent.objects.filter(pk=queuer.pk).exists()
