"""A run given up after RUNTIME_MAX_ATTEMPTS blocks the tasks it held (docs/runtime.md)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runtime import context
from runtime.lease import CLAIMED
from runtime.models import Run
from runtime.runner import run_agent

pytestmark = pytest.mark.django_db(transaction=True)


class WorkerDied(BaseException):
    """Stands for the worker process being killed (OOM, SIGKILL): nothing after it runs."""


def test_a_run_given_up_before_its_input_was_ever_stored_still_blocks_its_task(
    cast, offline, monkeypatch, settings
):
    """docs/runtime.md ("Durability"): a run whose worker is killed on every start is failed on
    the start after RUNTIME_MAX_ATTEMPTS "and blocks the tasks it held with that reason
    ('Needs attention')". When the worker dies while the run's input is being built (e.g. out
    of memory on a huge context: context.build reads every comment of its tasks), the run's
    `context` is never stored, and runner._settle_failed blocks only `_held_tasks(run) if
    run.context else []`: nothing. The task stays `assigned` to a managed agent with no run and
    no "Needs attention" entry, and the sweep never wakes it again (a trigger exists)."""
    settings.RUNTIME_MAX_ATTEMPTS = 2
    task = cast.assign(cast.alex)
    run = Run.objects.get(agent=cast.alex)

    def dies(run):
        raise WorkerDied

    monkeypatch.setattr(context, "build", dies)
    for _ in range(2):
        with pytest.raises(WorkerDied):
            run_agent(run.pk)
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert run_agent(run.pk) == CLAIMED
    run.refresh_from_db()
    task.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("Given up after 2 starts")
    assert task.status == "blocked", (task.status, run.outcome)
