"""A run whose lease another worker took does not settle its tasks."""

import threading

import pytest
from django.db import connection, transaction

from runtime.models import Run
from runtime.runner import run_agent
from tests.collaboration.conftest import wait_for
from tests.conftest import requires_postgres
from tests.fake_llm import Reply
from tests.runtime.scripts import script
from tests.tasks.test_lock_races import lock_waiters

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_thread(run_id) -> threading.Thread:
    def work():
        try:
            run_agent(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_run_that_lost_its_lease_does_not_block_the_tasks_of_the_run_that_took_it(cast, fake_llm):
    """Worker A's heartbeats stopped long enough for worker B to claim the run (the token in
    the row changed); A's model call then fails. A can neither record nor finish, nor block
    the task B is now working on (its settle's move is undone when the lease is not A's)."""
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply(status=400, hang=True))
    task = cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    thread = in_thread(run.pk)
    try:
        wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)
        Run.objects.filter(pk=run.pk).update(lease_token="worker-b")  # B claimed it
    finally:
        fake_llm.release()
        thread.join(timeout=30)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert (run.status, run.lease_token) == ("running", "worker-b")  # A could not finish it
    task.refresh_from_db()
    # B owns the run now: A must leave its task as it was.
    assert task.status == "assigned", f"task {task.status} by a run that lost its lease"


def test_a_run_that_lost_its_lease_does_not_complete_the_tasks_of_the_run_that_took_it(
    cast, fake_llm
):
    """The same at the answer's end: worker B claims the run (its row locked by the claim until
    it commits) as A gets its final answer; A's writes wait for the claim, then find the run
    is not theirs any more: A neither records, nor finishes, nor completes the task. (This held
    before the settle's own check too — the answer's record stops A first; the test guards the
    order. The settle's check is the first test's: A's failure is settled with no record.)"""
    cast.alex.llm_provider, cast.alex.llm_model = "openai", "m"
    cast.alex.save()
    script(fake_llm, cast.alex, Reply("A's answer", hang=True))
    task = cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)
    thread = in_thread(run.pk)
    try:
        wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)  # A's model call
        with transaction.atomic():
            Run.objects.filter(pk=run.pk).update(lease_token="worker-b")  # B's claim, uncommitted
            fake_llm.release()  # A has its answer
            wait_for(lock_waiters, timeout=30)  # A's next write waits for the run's row
    finally:
        fake_llm.release()
        thread.join(timeout=30)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert (run.status, run.lease_token) == ("running", "worker-b")
    task.refresh_from_db()
    assert task.status == "assigned", f"task {task.status} by a run that lost its lease"
