"""A run's records that are their own transaction commit without waiting for the disk; a call's
outcome, which commits with the call's effect, leaves its transaction's commit as it is
(runtime/services/record.py `run_record_turn`)."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runtime.models import Run, RunStatus, RunTurn
from runtime.services import run_record_turn, run_record_turns
from tests.conftest import requires_postgres

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NO_WAIT = "set_config('synchronous_commit', 'off', true)"


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.fixture
def running(cast):
    run = Run.objects.create(organization=cast.org, agent=cast.alex, trigger="created")
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, lease_token="tok", heartbeat_at=timezone.now()
    )
    return run


def record(run, index: int) -> bool:
    turn = {"index": index, "kind": "tool_call", "name": "get_task", "status": "running"}
    return run_record_turn(run=run, token="tok", turn=turn, prompt_tokens=1, completion_tokens=1)


def test_a_record_on_its_own_commits_without_waiting_for_the_disk_and_only_itself(running):
    before = synchronous_commit()
    with CaptureQueriesContext(connection) as sent:
        assert record(running, 0)
    (statement,) = sent.captured_queries
    assert NO_WAIT in statement["sql"]
    # Local to its own transaction: the connection's next ones wait for the disk as before.
    assert synchronous_commit() == before == "on"
    assert RunTurn.objects.filter(run=running, index=0).exists()


def test_an_outcome_recorded_with_the_calls_effect_keeps_that_transactions_commit(running):
    with transaction.atomic():
        with CaptureQueriesContext(connection) as sent:
            assert record(running, 1)
        # The call's effect commits with it: still waiting for the disk.
        assert synchronous_commit() == "on"
    assert NO_WAIT not in sent.captured_queries[0]["sql"]
    assert RunTurn.objects.filter(run=running, index=1).exists()


def test_a_lost_lease_records_nothing_either_way(running):
    Run.objects.filter(pk=running.pk).update(lease_token="someone-else")
    assert not record(running, 2)
    with transaction.atomic():
        assert not record(running, 3)
    assert not RunTurn.objects.filter(run=running).exists()


def test_several_turns_are_recorded_in_one_statement_and_not_at_all_without_the_lease(running):
    turns = [{"index": i, "kind": "tool_call", "name": "get_task", "status": "ok"} for i in (4, 5)]
    with CaptureQueriesContext(connection) as sent:
        assert run_record_turns(
            run=running, token="tok", turns=turns, prompt_tokens=7, completion_tokens=3
        )
    (statement,) = sent.captured_queries
    assert NO_WAIT in statement["sql"]
    assert sorted(RunTurn.objects.filter(run=running).values_list("index", "data__status")) == [
        (4, "ok"),
        (5, "ok"),
    ]
    running.refresh_from_db()
    assert (running.prompt_tokens, running.completion_tokens) == (7, 3)
    Run.objects.filter(pk=running.pk).update(lease_token="someone-else")
    more = [{"index": 6, "kind": "tool_call", "name": "get_task", "status": "ok"}]
    assert not run_record_turns(
        run=running, token="tok", turns=more, prompt_tokens=7, completion_tokens=3
    )
    assert not RunTurn.objects.filter(run=running, index=6).exists()
