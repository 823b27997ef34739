"""A task only queued for a managed agent (it has no room) must not wake it."""

import pytest

from runtime.models import Run
from tasks import services
from tests.factories import give_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_escalation_that_only_queues_the_task_for_a_full_senior_does_not_wake_it(cast):
    """docs/tasks.md ("Work reaching an agent"): `queued` does not wake — "the agent has no room
    yet"; docs/runtime.md: the expert a queued task only waits for is not woken, "it does not
    hold the task yet, and the queue's refill that gives it the task wakes it". An escalation to
    a senior at capacity queues the task for the senior (docs/tasks.md) — the same situation —
    yet its inbox kind is `escalated`, so the senior is woken: a run (a paid model call) about a
    task it neither holds nor can take, and a second run when the refill gives it the task."""
    give_tasks(cast.lena, 5)  # Lena, Alex's senior, is at capacity
    task = services.task_create(org=cast.org, actor=cast.actor(cast.alex), title="stuck",
                                assignee=cast.alex)  # fmt: skip
    moved = services.task_escalate(task=task, actor=cast.actor(cast.alex), reason="stuck")
    moved.refresh_from_db()
    assert (moved.status, moved.assignee_id, moved.queued_for_id) == ("queued", None, cast.lena.pk)
    assert not Run.objects.filter(agent=cast.lena).exists()
