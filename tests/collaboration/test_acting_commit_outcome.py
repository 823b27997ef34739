"""A tool call whose connection is lost during its COMMIT (the server committed; its answer never
came back) is not made again: the model is told its outcome is unknown. A transaction the
database undid itself (a deadlock, a serialization failure) is still tried again."""

import pytest
from django.db import OperationalError, connection

from collaboration.providers import LLMRequest
from collaboration.toolloop import run_tool_loop, undone_for_sure
from organization.caller import caller_for_agent
from tasks.models import Task
from tests.collaboration.conftest import calls_then_answers
from tests.conftest import agent_of, requires_postgres
from tests.fake_llm import ToolUse
from tests.pg_proxy import connections_through_proxy

pytestmark = [
    requires_postgres(),
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_pool"),
]


@pytest.fixture
def via_proxy(acme):
    """Every new database connection of this process goes through a PgProxy."""
    with connections_through_proxy() as proxy:
        yield proxy


def sarahs_commit_lost(acme, fake_llm, via_proxy, call: ToolUse, prompt: str, atomic_record: bool):
    """Sarah's tool loop, whose model makes `call` then answers "done": the next COMMIT, the
    call's, is lost on its way back. Returns the loop's result."""
    calls_then_answers(fake_llm, "sarah", call, "done")
    sarah = caller_for_agent(agent_of(acme, "agent-sarah"))
    request = LLMRequest(system="You are Sarah.", prompt=prompt, model="fake-model", label="sarah")
    via_proxy.armed.set()
    result = run_tool_loop(
        sarah,
        provider="openai",
        request=request,
        tool_names=[call.name],
        max_turns=3,
        atomic_record=atomic_record,
        on_turn=lambda turn: None,
    )
    assert via_proxy.dropped.is_set()
    return result


@pytest.mark.parametrize("atomic_record", [True, False])
def test_a_call_whose_commit_was_lost_in_transit_is_not_made_again(
    acme, fake_llm, via_proxy, atomic_record
):
    create = ToolUse("create_task", {"title": "Index migration"}, id="w")
    result = sarahs_commit_lost(
        acme, fake_llm, via_proxy, create, "Plan the index migration.", atomic_record
    )
    assert Task.objects.filter(title="Index migration").count() == 1, result.turns
    (call,) = [t for t in result.turns if t["kind"] == "tool_call"]
    assert (call["status"], call["error"]["code"]) == ("error", "tool_interrupted")
    assert result.text == "done"


@pytest.mark.parametrize(("state", "undone"), [("40P01", True), ("40001", True), ("57P01", False)])
def test_only_a_transaction_the_database_undid_itself_is_tried_again(state, undone):
    with pytest.raises(OperationalError) as raised, connection.cursor() as cursor:
        cursor.execute(f"DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '{state}'; END $$")
    assert undone_for_sure(raised.value) is undone


def test_a_read_only_call_whose_connection_was_lost_is_simply_made_again(acme, fake_llm, via_proxy):
    """A specialist's loop (no atomic record) runs each call in a transaction of its own: a
    read-only one lost at its COMMIT changed nothing, so it is made again, not `interrupted`."""
    roster = ToolUse("get_organization_roster", {}, id="r")
    result = sarahs_commit_lost(
        acme, fake_llm, via_proxy, roster, "Who is here?", atomic_record=False
    )
    (call,) = [t for t in result.turns if t["kind"] == "tool_call"]
    assert call["status"] == "ok", call
