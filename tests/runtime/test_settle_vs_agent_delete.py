"""A run's settle checks its lease after its move, locking the run's row last: deleting the
run's agent locks the task first (its escalation, as every move), then deletes the agent's runs
(CASCADE: the run's row). Had the settle locked the run first, the two orders would cross and a
managed agent deleted while its run settles would deadlock with it."""

import threading

import pytest
from django.db import transaction

from organization.models import Agent
from organization.services import agent_delete
from runtime.models import Run
from runtime.runner import run_agent
from tasks.models import Task
from tests.collaboration.conftest import wait_for
from tests.conftest import requires_postgres
from tests.fake_llm import Reply
from tests.runtime.scripts import script
from tests.tasks.test_lock_races import Side, lock_waiters

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DEADLINE = 30


def test_deleting_a_managed_agent_while_its_run_settles_does_not_deadlock(cast, fake_llm):
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply("Alex's answer", hang=True))
    task = cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    running = Side(lambda: run_agent(run.pk))
    ready, go = threading.Event(), threading.Event()

    def delete():
        with transaction.atomic():
            # The deletion's first lock: the escalation of the task Alex holds (a move's lock).
            list(Task.objects.select_for_update(no_key=True).filter(pk=task.pk))
            ready.set()
            assert go.wait(DEADLINE), "never let go"
            return agent_delete(caller=cast.human, agent=Agent.objects.get(pk=cast.alex.pk))

    try:
        wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=DEADLINE)
        deleting = Side(delete)
        assert ready.wait(DEADLINE)
        fake_llm.release()  # Alex has its answer: the run settles, completing its task
        wait_for(lock_waiters, timeout=DEADLINE)  # the settle's move waits for the task
    finally:
        go.set()
        fake_llm.release()
    ran, deleted = running.result(), deleting.result()
    assert not isinstance(deleted, Exception), f"the deletion failed: {deleted!r}"
    assert not isinstance(ran, Exception), f"the run failed: {ran!r}"
    assert not Agent.objects.filter(pk=cast.alex.pk).exists()
