"""What a run gives its model is what its agent may see: nothing more (docs/design.md, visibility)."""

import pytest

from runtime.models import Run
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.runtime.conftest import drain

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Board-only: the acquisition of Initech closes on May 3rd."


def test_a_runs_input_does_not_carry_a_parent_task_its_agent_may_not_see(cast, offline):
    """docs/design.md: an agent key sees the tasks it created, holds, is queued for or passed
    through; "anything else answers 404, exactly as if it did not exist" — colleagues' task
    details are not for it. Alex holds a subtask of Lena's task, which he may not see (GET
    /api/tasks/<parent> is 404 for his key). Yet his run's input (context.build) carries the
    parent's description, so it reaches his model, and his own key reads it back in
    GET /api/runs/<id> (`input`)."""
    parent = cast.assign(cast.lena, "Acquisition prep", description=SECRET)
    Run.objects.all().delete()
    cast.assign(cast.alex, "Tune the queries", by=cast.actor(cast.lena), parent=parent)
    drain()
    alex = KeyClient(make_key(cast.org, cast.alex))
    assert alex.get(f"/api/tasks/{parent.pk}").status_code == 404  # not his to see
    (run,) = Run.objects.filter(agent=cast.alex)
    body = alex.get(f"/api/runs/{run.pk}").json()
    assert SECRET not in body["input"]
