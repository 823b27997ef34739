"""A late settle and the sweep booking the same reservation at once (real threads, PostgreSQL).

`_book` (the sweep) locks the budgets, then the ledger row; so must the one-statement settle
(costs/sql.py SETTLE), whose ledger update names `locked` for that: without it, `booked`'s
one-time filter `EXISTS (SELECT 1 FROM settled)` ran before its join read `locked`, locking the
budgets after the ledger row, and PostgreSQL aborted one of the two: the settle (its caller,
providers.complete, lost the reply it paid for) or the sweep (the beat task errored).
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from costs import metering
from costs.budgets import budget_set
from costs.metering import reserve, settle, sweep_expired
from costs.models import UsageRecord
from organization.caller import caller_for_member
from tests.costs.test_metering import meter
from tests.factories import make_admin_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def waiting(pid_box, deadline=20.0, longer_than: float = 0.0) -> None:
    """Poll (with a deadline) until the backend pid waits on a lock for `longer_than` s."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        pid = pid_box.get("pid")
        if pid is not None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT extract(epoch FROM now() - waitstart) FROM pg_locks "
                    "WHERE pid = %s AND NOT granted AND waitstart IS NOT NULL",
                    [pid],
                )
                row = cursor.fetchone()
            if row is not None and row[0] is not None and float(row[0]) > longer_than:
                return
        time.sleep(0.02)
    raise AssertionError(f"backend {pid_box} never waited")


def test_a_late_settle_racing_the_sweep_is_not_a_deadlock(cast, monkeypatch):
    monkeypatch.setattr(metering, "ONE_STATEMENT", True)
    admin = caller_for_member(make_admin_user(cast.org), cast.org)
    budget_set(caller=admin, scope="organization", limit_usd="10")
    ticket = reserve(meter(cast.alex), "openai", "fake-model", prompt_bound=1000, max_tokens=1000)
    hold, release = threading.Event(), threading.Event()
    pids = {"settle": {}, "sweep": {}}
    errors = {}

    def holder():  # stands in front of both on the ledger row, so the settle queues first
        try:
            with transaction.atomic():
                UsageRecord.objects.select_for_update().get(pk=ticket.record_id)
                hold.set()
                release.wait(30)
        finally:
            connection.close()

    def settler():
        try:
            pids["settle"]["pid"] = connection.cursor().connection.info.backend_pid
            settle(ticket, prompt_tokens=1000, completion_tokens=1000)
        except Exception as exc:  # noqa: BLE001
            errors["settle"] = exc
        finally:
            connection.close()

    def sweeper():
        try:
            pids["sweep"]["pid"] = connection.cursor().connection.info.backend_pid
            sweep_expired(now=timezone.now() + timedelta(days=1))
        except Exception as exc:  # noqa: BLE001
            errors["sweep"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert hold.wait(20)
    threads.append(threading.Thread(target=settler))
    threads[1].start()
    waiting(pids["settle"])  # the settle waits for the row
    threads.append(threading.Thread(target=sweeper))
    threads[2].start()
    waiting(pids["sweep"])  # the sweep holds the budget and waits for the row
    release.set()  # the settle takes the row, then waits for the budget the sweep holds
    for thread in threads:
        thread.join(30)
    assert errors == {}, errors
    record = UsageRecord.objects.get(pk=ticket.record_id)
    assert record.state in ("recorded", "expired")
