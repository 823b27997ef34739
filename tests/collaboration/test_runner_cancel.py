"""A cancel accepted while a session runs: nothing more is spent, what was spent is reported."""

import threading
import time

import pytest
from django.db import connection

from collaboration import runner
from collaboration.models import CollaborationSession
from collaboration.services import session_cancel
from tests.collaboration.conftest import event_names, human, run, specialists, wait_for
from tests.collaboration.starts import create, hierarchical
from tests.fake_llm import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def cancelling_reply(caller, session_ids: dict, text: str = "an answer\nCONFIDENCE: 0.5"):
    """A reply whose text cancels the session as the server answers: the cancel is accepted
    while the agent's call is in flight, well within a heartbeat."""

    def answer(call):
        try:
            session = CollaborationSession.objects.get(pk=session_ids["id"])
            session_cancel(caller=caller, session=session)
        finally:
            connection.close()  # the fake server's thread
        return text

    return Reply(answer)


def test_a_cancel_accepted_before_the_synthesis_starts_spends_nothing_on_it(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(agent="a", replies=cancelling_reply(caller, ids))
    session = create(acme, agents=specialists("a"), synthesis="coordinator")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert not fake_llm.calls_for(purpose="synthesis")
    names = event_names(session)
    assert names[-1] == "cancelled" and "synthesis:start" not in names


def test_a_sequential_session_cancelled_during_an_agent_starts_no_next_agent(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(agent="a", replies=cancelling_reply(caller, ids))
    session = create(acme, mode="sequential", agents=specialists("a", "b"), synthesis="merge")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert not fake_llm.calls_for(agent="b")
    assert session.contributions.get(agent_key="b").status == "cancelled"


def test_a_plan_rejected_after_a_cancel_is_not_asked_for_again(acme, fake_llm):
    caller, ids = human(acme), {}
    fake_llm.on(purpose="plan", replies=cancelling_reply(caller, ids, "not JSON"))
    session = hierarchical(acme, "coord", "a", "b", synthesis="merge")
    ids["id"] = session.pk
    session = run(session)
    assert session.status == "cancelled"
    assert len(fake_llm.calls_for(purpose="plan")) == 1
    assert not fake_llm.calls_for(purpose="agent")
    assert "fallback" not in event_names(session)


def test_a_plan_is_not_asked_again_once_the_session_is_cancelled(acme, fake_llm):
    """The heartbeat sees the cancel while the coordinator's first (rejected) plan is in flight:
    the session ends cancelled, and its orphaned thread makes no second call."""
    fake_llm.on(purpose="plan", replies=Reply("not JSON", hang=True))
    caller = human(acme)
    session = hierarchical(acme, "coord", "a", synthesis="merge", agent_timeout=30)
    thread = threading.Thread(target=lambda: (runner.run_session(session.pk), connection.close()))
    thread.start()
    wait_for(lambda: fake_llm.calls_for(purpose="plan"), timeout=30)
    session_cancel(caller=caller, session=session)
    thread.join(timeout=15)
    session.refresh_from_db()
    assert session.status == "cancelled"
    fake_llm.release()
    wait_for(lambda: fake_llm.calls_for(purpose="plan")[0].answered, timeout=10)
    # A second call would follow the first answer at once; none comes within a second.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert len(fake_llm.calls_for(purpose="plan")) == 1
        time.sleep(0.05)


def test_a_cancelled_session_reports_what_its_agents_spent(acme, fake_llm, org_client):
    fake_llm.on(
        agent="quick", replies=Reply("q\nCONFIDENCE: 0.5", prompt_tokens=30, completion_tokens=12)
    )
    fake_llm.on(agent="slow", replies=Reply(hang=True))
    caller = human(acme)
    session = create(acme, agents=specialists("quick", "slow"), synthesis="merge", agent_timeout=30)
    thread = threading.Thread(target=lambda: (runner.run_session(session.pk), connection.close()))
    thread.start()
    wait_for(lambda: session.contributions.filter(agent_key="quick", status="completed").exists())
    session_cancel(caller=caller, session=session)
    thread.join(timeout=15)
    body = org_client(acme).get(f"/api/collaborations/{session.pk}").json()
    assert body["status"] == "cancelled"
    assert body["metadata"]["total_tokens"] == 42
    assert body["metadata"]["agent_tokens"] == 42
    assert body["metadata"]["agents_completed"] == 1
    assert body["metadata"]["duration_ms"] >= 0
    # The hung call answers late: the ledger booked it, and so do its contribution and the
    # session's metadata (they counted none of it).
    from costs.models import UsageRecord

    fake_llm.release()

    slow = session.contributions.get(agent_key="slow")
    wait_for(
        lambda: (
            UsageRecord.objects.filter(session=session, label="slow", state="recorded").exists()
            and slow.__class__.objects.get(pk=slow.pk).tokens_used > 0
        )
    )
    booked = sum(
        r.prompt_tokens + r.completion_tokens for r in UsageRecord.objects.filter(session=session)
    )
    body = org_client(acme).get(f"/api/collaborations/{session.pk}").json()
    assert (body["status"], body["metadata"]["total_tokens"]) == ("cancelled", booked)
    assert sum(c["tokens_used"] for c in body["contributions"]) == booked
