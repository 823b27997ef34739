"""Model slots (LLM_MAX_CALLS_IN_FLIGHT, LLM_MAX_CALLS_PER_PROVIDER): past the bound a run's call
waits its turn, first come first served, and the run says so; a provider's 429 that outlasts the
SDK's retries waits and tries again instead of failing the run."""

import time

import pytest
from django.conf import settings

from runtime.models import Run
from tests.fake_llm import Reply
from tests.runtime.conftest import drain, wait_for
from tests.runtime.scripts import managed_by, script


def waiting_for(agent) -> str | None:
    return Run.objects.filter(agent=agent).values_list("waiting_for", flat=True).first()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
@pytest.mark.parametrize("bound", ["LLM_MAX_CALLS_IN_FLIGHT", "LLM_MAX_CALLS_PER_PROVIDER"])
def test_past_the_bound_a_run_waits_for_a_model_slot_and_says_so(
    cast, fake_llm, worker, settings, org_client, bound
):
    if bound == "LLM_MAX_CALLS_IN_FLIGHT":
        settings.LLM_MAX_CALLS_IN_FLIGHT = 1
    else:
        settings.LLM_MAX_CALLS_PER_PROVIDER = {"openai": 1}
    for agent in (cast.alex, cast.sarah):
        managed_by(agent)
    script(fake_llm, cast.alex, Reply("Indexed.", hang=True))
    script(fake_llm, cast.sarah, "Styled.")
    cast.assign(cast.alex)
    wait_for(lambda: fake_llm.calls_for(agent="agent-alex"), timeout=30)
    cast.assign(cast.sarah)
    wait_for(lambda: waiting_for(cast.sarah) == "model_slot", timeout=30)
    assert not fake_llm.calls_for(agent="agent-sarah")  # no call while the slot is taken
    waiting = Run.objects.get(agent=cast.sarah)
    shown = org_client(cast.org).get(f"/api/runs/{waiting.pk}")
    assert (shown.status_code, shown.json()["waiting_for"]) == (200, "model_slot")
    released = time.monotonic()  # the fake's clock: Alex's answer goes from here on
    fake_llm.release()
    wait_for(lambda: Run.objects.get(agent=cast.sarah).is_finished, timeout=30)
    alex, sarah = (Run.objects.get(agent=a) for a in (cast.alex, cast.sarah))
    assert (alex.status, sarah.status) == ("completed", "completed"), (alex.error, sarah.error)
    assert sarah.waiting_for == ""
    # Sarah's call started once Alex's slot came free (the fake marks Alex's call ended only
    # after writing its answer, which may be after Sarah's request arrived).
    assert fake_llm.calls_for(agent="agent-sarah")[0].started >= released


@pytest.mark.django_db(transaction=True)
def test_a_429_past_the_sdks_retries_waits_and_the_run_goes_on(cast, fake_llm, settings):
    settings.COLLAB_PROVIDER_MAX_RETRIES = 0  # every 429 reaches the runtime
    managed_by(cast.alex)
    script(fake_llm, cast.alex, Reply(status=429), Reply(status=429), "Indexed.")
    cast.assign(cast.alex)
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert (run.status, run.waiting_for) == ("completed", ""), run.error
    assert [c.status for c in fake_llm.calls_for(agent="agent-alex")] == [429, 429, 200]


@pytest.mark.django_db(transaction=True)
def test_a_429_that_lasts_past_the_wait_fails_the_call(cast, fake_llm, settings):
    settings.COLLAB_PROVIDER_MAX_RETRIES = 0
    settings.LLM_RATE_LIMIT_MAX_WAIT_SECONDS = 0
    managed_by(cast.alex)
    script(fake_llm, cast.alex, Reply(status=429), "Indexed.")
    cast.assign(cast.alex)
    drain()
    run = Run.objects.get(agent=cast.alex)
    assert run.status == "failed"
    assert "HTTP 429" in run.error
    assert [c.status for c in fake_llm.calls_for(agent="agent-alex")] == [429]
