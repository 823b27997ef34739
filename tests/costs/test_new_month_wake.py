"""`new_month_wake` clears the marks of stale budgets locking them in id order, the order every
budget writer takes them in (costs/sql.py; metering's refusal loop marks its budgets one
statement each, in id order). One UPDATE with no order took them in the heap's order and
deadlocked with such a writer."""

import threading

import pytest
from django.db import connection, transaction

from costs.budgets import new_month_wake
from costs.metering import current_period
from costs.models import Budget
from tests.collaboration.conftest import wait_for
from tests.conftest import requires_postgres
from tests.tasks.test_lock_races import lock_waiters

pytestmark = [requires_postgres(), pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LAST_MONTH = "2000-01"


def exhausted_last_month(agent, period) -> Budget:
    """An agent's $1 budget of `period` still marked exhausted in the month before."""
    return Budget.objects.create(
        organization=agent.organization,
        scope="agent",
        agent=agent,
        limit_usd=1,
        period=period,
        exhausted_period=LAST_MONTH,
    )


def test_new_month_wake_does_not_deadlock_with_a_writer_taking_budgets_in_id_order(cast):
    period = current_period()
    first = exhausted_last_month(cast.alex, period)
    second = exhausted_last_month(cast.sarah, period)
    assert first.pk < second.pk
    # An ordinary write of the first budget (a settle, say): its row now lies after the second's.
    Budget.objects.filter(pk=first.pk).update(refused_period=LAST_MONTH)
    outcome = {}

    def sweep():
        try:
            outcome["woken"] = new_month_wake()
        except Exception as exc:
            outcome["raised"] = exc
        finally:
            connection.close()

    with transaction.atomic():
        # A writer marks its budgets in id order, one statement each (metering's refusal loop).
        Budget.objects.filter(pk=first.pk).update(refused_period=period)
        thread = threading.Thread(target=sweep, daemon=True)
        thread.start()
        wait_for(lock_waiters, timeout=10)  # the sweep holds the second, waits for the first
        try:
            Budget.objects.filter(pk=second.pk).update(refused_period=period)
        except Exception as exc:
            outcome["writer_raised"] = exc
            raise
    thread.join(timeout=30)  # the sweep goes on once the writer has committed
    assert not thread.is_alive()
    assert "raised" not in outcome and "writer_raised" not in outcome, outcome
    assert outcome["woken"] == 1
