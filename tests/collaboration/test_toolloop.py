"""The tool loop over both SDKs against the fake server: wire formats, refusals, limits, resume."""

import json

import pytest
from django.db import connection

from collaboration.providers import LLMRequest, Message, ToolSpec
from collaboration.providers import complete as provider_complete
from collaboration.providers.openai import strict_schema
from collaboration.toolloop import run_tool_loop
from infrastructure.errors import DomainError
from infrastructure.models import OutboxMessage
from organization.caller import caller_for_agent
from organization.registry import REGISTRY, register_tool
from tests.conftest import agent_of
from tests.fake_llm import Reply, ToolUse

pytestmark = pytest.mark.django_db

ROSTER = "get_organization_roster"
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def request(**extra) -> LLMRequest:
    fields = {
        "system": "You are Sarah.",
        "prompt": "Who can help with PostgreSQL?",
        "model": "m-1",
        "label": "sarah",
        **extra,
    }
    return LLMRequest(**fields)


def loop(caller, provider, tools=(ROSTER,), max_turns=4, **kwargs):
    return run_tool_loop(
        caller,
        provider=provider,
        request=request(),
        tool_names=list(tools),
        max_turns=max_turns,
        **kwargs,
    )


def sarah_calls_then_says_done(fake, *tools: str) -> None:
    """Sarah's model calls these tools in one turn (ids a, b, c, ...), then answers "done"."""
    calls = [ToolUse(name, id=chr(ord("a") + i)) for i, name in enumerate(tools)]
    fake.on(agent="sarah", replies=[Reply(tool_calls=calls), Reply("done")])


@pytest.fixture
def sarah(acme):
    return caller_for_agent(agent_of(acme, "agent-sarah"))


@pytest.fixture
def counted_tools():
    """Two tools registered for the test that count their runs: one read-only, one that writes."""
    runs = {"test_count_read": 0, "test_count_write": 0}

    def registered(name, read_only):
        @register_tool(name, f"A test tool ({name}).", {"type": "object"}, read_only=read_only)
        def handler(caller, params):
            runs[name] += 1
            return {"run": runs[name], "as": caller.label}

    registered("test_count_read", True)
    registered("test_count_write", False)
    yield runs
    for name in runs:
        REGISTRY.pop(name, None)


@BOTH
def test_a_tool_call_round_trips_in_the_providers_wire_format(acme, sarah, fake_llm, provider):
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(
                "Let me look.",
                tool_calls=[ToolUse(ROSTER, {"filter": "by_expertise", "expertise": "PostgreSQL"})],
                prompt_tokens=100,
                completion_tokens=20,
            ),
            Reply("Alex knows PostgreSQL.", prompt_tokens=180, completion_tokens=7),
        ],
    )
    result = loop(sarah, provider)

    first, second = fake_llm.calls_for(agent="sarah")
    assert {first.api, second.api} == {provider}
    schema = REGISTRY[ROSTER].input_schema
    description = REGISTRY[ROSTER].description
    if provider == "openai":
        assert first.body["tools"] == [
            {
                "type": "function",
                "function": {"name": ROSTER, "description": description, "parameters": schema},
            }
        ]
        assistant, tool = second.body["messages"][-2:]
        call_id = assistant["tool_calls"][0]["id"]
        assert assistant == {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": ROSTER,
                        "arguments": json.dumps(
                            {"filter": "by_expertise", "expertise": "PostgreSQL"}
                        ),
                    },
                }
            ],
        }
        assert tool["role"] == "tool" and tool["tool_call_id"] == call_id
        roster = json.loads(tool["content"])
    else:
        assert first.body["tools"] == [
            {"name": ROSTER, "description": description, "input_schema": schema}
        ]
        assistant, user = second.body["messages"][-2:]
        call_id = assistant["content"][1]["id"]
        assert assistant == {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": ROSTER,
                    "input": {"filter": "by_expertise", "expertise": "PostgreSQL"},
                },
            ],
        }
        (block,) = user["content"]
        assert user["role"] == "user" and block["type"] == "tool_result"
        assert block["tool_use_id"] == call_id and "is_error" not in block
        roster = json.loads(block["content"])
    # Run as Sarah: her roster, with Alex the PostgreSQL expert among her colleagues.
    assert roster["agent_context"]["id"] == "agent-sarah"
    assert [c["id"] for c in roster["colleagues"]] == ["agent-alex"]
    assert first.tool_names == second.tool_names == [ROSTER]
    assert second.tool_results == [
        {
            "role": "tool",
            "content": json.dumps(roster),
            "tool_calls": [],
            "tool_call_id": call_id,
            "is_error": False,
        }
    ]

    assert (result.stop_reason, result.text, result.error) == (
        "answered",
        "Alex knows PostgreSQL.",
        "",
    )
    assert (result.prompt_tokens, result.completion_tokens, result.tokens_used) == (280, 27, 307)
    assert (result.attempts, result.provider, result.model) == (2, provider, "m-1")
    assert [(t["index"], t["kind"]) for t in result.turns] == [
        (0, "model"),
        (1, "tool_call"),
        (2, "model"),
    ]
    assert result.turns[0] == {
        "kind": "model",
        "index": 0,
        "text": "Let me look.",
        "stop_reason": "tool_calls",
        "tool_calls": [
            {
                "id": call_id,
                "name": ROSTER,
                "arguments": {"filter": "by_expertise", "expertise": "PostgreSQL"},
            }
        ],
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "attempts": 1,
        "provider": provider,
        "model": "m-1",
    }
    assert result.turns[1] == {
        "kind": "tool_call",
        "index": 1,
        "id": call_id,
        "name": ROSTER,
        "arguments": {"filter": "by_expertise", "expertise": "PostgreSQL"},
        "status": "ok",
        "result": roster,
    }
    assert result.turns[2]["stop_reason"] == "stop" and result.turns[2]["tool_calls"] == []
    json.dumps(result.as_dict())  # JSON-able as it is


def test_anthropic_is_never_sent_back_a_blank_text_block(acme, sarah, fake_llm):
    """Claude may answer a blank text block ("\n\n") beside its tool_use; the messages API
    refuses one in the conversation (400 "text content blocks must contain non-whitespace
    text"), which failed the loop at its next model call."""
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply("\n\n", tool_calls=[ToolUse(ROSTER, {"filter": "all"})]),
            Reply(" ", tool_calls=[ToolUse(ROSTER, {"filter": "all"})]),
            Reply("Alex knows PostgreSQL."),
        ],
    )
    result = loop(sarah, "anthropic")

    assert (result.stop_reason, result.text) == ("answered", "Alex knows PostgreSQL.")
    last = fake_llm.calls_for(agent="sarah")[-1]
    sent = [
        block
        for m in last.body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "text"
    ]
    assert all(block["text"].strip() for block in sent), sent
    assistants = [m for m in last.body["messages"] if m["role"] == "assistant"]
    assert [[b["type"] for b in m["content"]] for m in assistants] == [["tool_use"], ["tool_use"]]


@BOTH
def test_a_refusal_goes_back_to_the_model_with_its_code_and_the_loop_goes_on(
    acme, sarah, fake_llm, provider
):
    # An agent reads only its own system prompt: Alex's answers 404 agent_not_found for Sarah.
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(tool_calls=[ToolUse("get_my_context", {"agent": "agent-alex"}, id="c1")]),
            Reply(tool_calls=[ToolUse("get_my_context", {}, id="c2")]),
            Reply("I can only read my own prompt."),
        ],
    )
    result = loop(sarah, provider, tools=["get_my_context"])
    refused = {"success": False, "error": "Agent not found: agent-alex", "code": "agent_not_found"}
    assert result.stop_reason == "answered"
    assert result.text == "I can only read my own prompt."
    assert [(t["kind"], t.get("status")) for t in result.turns] == [
        ("model", None),
        ("tool_call", "error"),
        ("model", None),
        ("tool_call", "ok"),
        ("model", None),
    ]
    assert result.turns[1]["error"] == refused
    assert "Your ID: agent-sarah" in result.turns[3]["result"]["system_prompt"]
    second = fake_llm.calls_for(agent="sarah")[1]
    (error,) = second.tool_results
    assert (error["tool_call_id"], json.loads(error["content"])) == ("c1", refused)
    if provider == "anthropic":
        assert second.body["messages"][-1]["content"][0]["is_error"] is True
        assert error["is_error"] is True


@BOTH
def test_a_tool_not_offered_and_arguments_that_are_no_object_are_refused(
    acme, sarah, fake_llm, provider
):
    uses = [ToolUse("create_task", {"title": "sneaky"}, id="w1")]
    if provider == "openai":  # only OpenAI's arguments are text the model may get wrong
        uses.append(ToolUse(ROSTER, '{"filter": ', id="w2"))
    fake_llm.on(agent="sarah", replies=[Reply(tool_calls=uses), Reply("ok then")])
    result = loop(sarah, provider)
    errors = [t["error"]["code"] for t in result.tool_calls]
    assert errors == ["unknown_tool", "invalid_arguments"][: len(uses)]
    assert result.tool_calls[0]["error"]["error"] == "No tool 'create_task' is offered to you."
    assert not acme.tasks.exists()
    assert result.stop_reason == "answered"


@BOTH
def test_max_turns_stops_the_loop_and_the_last_turns_calls_are_not_run(
    acme, sarah, fake_llm, provider, counted_tools
):
    fake_llm.on(agent="sarah", replies=Reply("again", tool_calls=[ToolUse("test_count_read")]))
    result = loop(sarah, provider, tools=["test_count_read"], max_turns=2)
    assert result.stop_reason == "max_turns"
    assert len(fake_llm.calls_for(agent="sarah")) == 2
    assert counted_tools["test_count_read"] == 1
    assert [t["kind"] for t in result.turns] == ["model", "tool_call", "model"]
    assert result.text == "again"


@BOTH
def test_a_provider_error_after_the_retries_stops_the_loop_with_what_it_spent(
    acme, sarah, fake_llm, provider, settings
):
    settings.COLLAB_PROVIDER_MAX_RETRIES = 0
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(tool_calls=[ToolUse(ROSTER)], prompt_tokens=10, completion_tokens=5),
            Reply(status=500),
        ],
    )
    result = loop(sarah, provider)
    assert result.stop_reason == "provider_error"
    assert result.error.startswith(f"{provider}: HTTP 500 after 1 attempt(s)")
    assert (result.tokens_used, result.attempts) == (15, 1)
    assert [t["kind"] for t in result.turns] == ["model", "tool_call"]


def test_on_turn_sees_each_model_turn_and_each_call_before_and_after_it_runs(
    acme, sarah, fake_llm, counted_tools
):
    sarah_calls_then_says_done(fake_llm, "test_count_read", "test_count_read")
    seen = []

    def on_turn(turn):
        runs = counted_tools["test_count_read"]
        seen.append((turn["index"], turn["kind"], turn.get("status"), runs))

    result = loop(sarah, "openai", tools=["test_count_read"], on_turn=on_turn)
    assert seen == [
        (0, "model", None, 0),
        (1, "tool_call", "running", 0),
        (1, "tool_call", "ok", 1),
        (2, "tool_call", "running", 1),
        (2, "tool_call", "ok", 2),
        (3, "model", None, 2),
    ]
    assert result.turns[1]["result"] == {"run": 1, "as": "agent-sarah"}


@pytest.fixture
def writes_then_refuses():
    """A tool registered for the test that writes a row, then refuses (a DomainError)."""

    @register_tool("test_write_then_refuse", "A test tool.", {"type": "object"}, read_only=False)
    def handler(caller, params):
        OutboxMessage.objects.create(task_name="test.half_written")
        raise DomainError("Refused after writing.", "test_refused")

    yield "test_write_then_refuse"
    REGISTRY.pop("test_write_then_refuse", None)


def test_with_atomic_record_each_call_is_recorded_once_with_its_outcome_and_time(
    acme, sarah, fake_llm, counted_tools
):
    sarah_calls_then_says_done(fake_llm, "test_count_write", "test_count_read")
    seen, test_blocks = [], len(connection.atomic_blocks)

    def on_turn(turn):
        # Inside the call's transaction: its effect and this record commit together.
        in_transaction = len(connection.atomic_blocks) > test_blocks
        seen.append((turn["index"], turn["kind"], turn.get("status"), in_transaction))
        if turn["kind"] == "tool_call":
            assert turn["ms"] >= 0

    loop(
        sarah,
        "openai",
        tools=["test_count_write", "test_count_read"],
        on_turn=on_turn,
        atomic_record=True,
    )
    assert seen == [
        (0, "model", None, False),
        (1, "tool_call", "ok", True),
        # A read-only call has nothing to commit with: recorded after it ran, on its own.
        (2, "tool_call", "ok", False),
        (3, "model", None, False),
    ]
    assert counted_tools == {"test_count_write": 1, "test_count_read": 1}


def test_with_atomic_record_read_only_calls_are_recorded_together_before_the_next_write_or_model(
    acme, sarah, fake_llm, counted_tools
):
    read, write = "test_count_read", "test_count_write"
    sarah_calls_then_says_done(fake_llm, read, read, write, read)
    records = []
    loop(
        sarah,
        "openai",
        tools=[read, write],
        atomic_record=True,
        on_turn=lambda turn: records.append(turn["index"]),
        on_turns=lambda turns: records.append([t["index"] for t in turns]),
    )
    # Never a record before those of the calls before it: the reads before the write go first,
    # in one batch; the read after it goes before the next model call.
    assert records == [0, [1, 2], 3, [4], 5]
    assert counted_tools == {read: 3, write: 1}


def test_a_resumed_loop_runs_again_a_read_only_call_whose_record_was_lost(
    acme, sarah, fake_llm, counted_tools
):
    read = "test_count_read"
    fake_llm.on(agent="sarah", replies=[Reply(tool_calls=[ToolUse(read, id="a")]), Reply("ok")])
    recorded = []

    def dies_recording_the_reads(turns):
        raise Crash  # the process dies before the read's record is written

    with pytest.raises(Crash):
        loop(
            sarah,
            "openai",
            tools=[read],
            atomic_record=True,
            on_turn=recorded.append,
            on_turns=dies_recording_the_reads,
        )
    assert [t["kind"] for t in recorded] == ["model"]
    result = loop(sarah, "openai", tools=[read], atomic_record=True, turns=recorded)
    assert counted_tools[read] == 2  # nothing had recorded it: it ran again, harmlessly
    assert [(t["kind"], t.get("status")) for t in result.turns] == [
        ("model", None),
        ("tool_call", "ok"),
        ("model", None),
    ]


def test_with_atomic_record_a_refused_call_is_undone_whole_and_its_refusal_recorded(
    acme, sarah, fake_llm, writes_then_refuses
):
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(tool_calls=[ToolUse(writes_then_refuses, id="r")]),
            Reply("understood"),
        ],
    )
    seen = []
    result = loop(
        sarah,
        "openai",
        tools=[writes_then_refuses],
        atomic_record=True,
        on_turn=lambda turn: seen.append(turn),
    )
    assert not OutboxMessage.objects.filter(task_name="test.half_written").exists()
    (refusal,) = [t for t in seen if t["kind"] == "tool_call"]
    assert (refusal["status"], refusal["error"]["code"]) == ("error", "test_refused")
    assert result.turns[1]["error"]["code"] == "test_refused"
    second = fake_llm.calls_for(agent="sarah")[1]
    assert json.loads(second.tool_results[0]["content"])["code"] == "test_refused"


class Crash(Exception):
    pass


@BOTH
def test_a_resumed_loop_does_not_run_a_recorded_call_again(
    acme, sarah, fake_llm, provider, counted_tools
):
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(tool_calls=[ToolUse("test_count_write", id="w")]),
            Reply("written once"),
        ],
    )
    recorded = {}

    def crash_after_the_call(turn):
        recorded[turn["index"]] = turn
        if turn.get("status") == "ok":
            raise Crash  # the process dies once the call's outcome is recorded

    with pytest.raises(Crash):
        loop(sarah, provider, tools=["test_count_write"], on_turn=crash_after_the_call)
    assert counted_tools["test_count_write"] == 1

    turns = [recorded[i] for i in sorted(recorded)]
    result = loop(sarah, provider, tools=["test_count_write"], turns=turns)
    assert counted_tools["test_count_write"] == 1
    assert (result.stop_reason, result.text) == ("answered", "written once")
    assert len(fake_llm.calls_for(agent="sarah")) == 2
    # The resumed call carried the recorded call and its result back to the model.
    (resumed_result,) = fake_llm.calls_for(agent="sarah")[1].tool_results
    assert json.loads(resumed_result["content"]) == {"run": 1, "as": "agent-sarah"}
    assert [t["kind"] for t in result.turns] == ["model", "tool_call", "model"]


@BOTH
def test_calls_of_one_reply_that_share_an_id_each_run_once_even_across_a_resume(
    acme, sarah, fake_llm, provider, counted_tools
):
    """Some OpenAI-compatible servers give two calls of one reply the same id (or none). A
    resumed loop finds recorded calls by id: the second, never run, read as done — the model
    never had its result. Each call of a reply gets an id of its own."""
    fake_llm.on(
        agent="sarah",
        replies=[
            Reply(
                tool_calls=[
                    ToolUse("test_count_write", id="dup"),
                    ToolUse("test_count_read", id="dup"),
                ]
            ),
            Reply("both done"),
        ],
    )
    recorded = {}

    def crash_after_the_first_call(turn):
        recorded[turn["index"]] = turn
        if turn.get("status") == "ok" and turn["name"] == "test_count_write":
            raise Crash

    with pytest.raises(Crash):
        loop(
            sarah,
            provider,
            tools=["test_count_write", "test_count_read"],
            on_turn=crash_after_the_first_call,
        )
    turns = [recorded[i] for i in sorted(recorded)]
    result = loop(sarah, provider, tools=["test_count_write", "test_count_read"], turns=turns)
    assert counted_tools == {"test_count_write": 1, "test_count_read": 1}
    calls = [t for t in result.turns if t["kind"] == "tool_call"]
    assert [c["name"] for c in calls] == ["test_count_write", "test_count_read"]
    assert len({c["id"] for c in calls}) == 2
    results = fake_llm.calls_for(agent="sarah")[-1].tool_results
    assert len({r["tool_call_id"] for r in results}) == 2


def test_a_call_interrupted_while_running_is_run_again_only_if_it_cannot_harm(
    acme, sarah, fake_llm, counted_tools
):
    fake_llm.on(agent="sarah", replies=Reply("fine"))
    calls = [
        {"id": "r", "name": "test_count_read", "arguments": {}},
        {"id": "w", "name": "test_count_write", "arguments": {}},
    ]
    turns = [
        {
            "kind": "model",
            "index": 0,
            "text": "",
            "tool_calls": calls,
            "stop_reason": "tool_calls",
            "prompt_tokens": 3,
            "completion_tokens": 4,
            "attempts": 1,
            "provider": "openai",
            "model": "m-1",
        },
        {
            "kind": "tool_call",
            "index": 1,
            "id": "r",
            "name": "test_count_read",
            "arguments": {},
            "status": "running",
        },
        {
            "kind": "tool_call",
            "index": 2,
            "id": "w",
            "name": "test_count_write",
            "arguments": {},
            "status": "running",
        },
    ]
    result = loop(sarah, "openai", tools=["test_count_read", "test_count_write"], turns=turns)
    assert counted_tools == {"test_count_read": 1, "test_count_write": 0}
    assert result.turns[1]["status"] == "ok"
    assert result.turns[2]["status"] == "error"
    assert result.turns[2]["error"]["code"] == "tool_interrupted"
    assert (result.stop_reason, result.tokens_used) == (
        "answered",
        7 + result.turns[3]["prompt_tokens"] + result.turns[3]["completion_tokens"],
    )


def test_resuming_an_answered_loop_calls_nothing(acme, sarah, fake_llm):
    turns = [
        {
            "kind": "model",
            "index": 0,
            "text": "the answer",
            "tool_calls": [],
            "stop_reason": "stop",
            "prompt_tokens": 1,
            "completion_tokens": 2,
            "attempts": 1,
            "provider": "openai",
            "model": "m-1",
        }
    ]
    result = loop(sarah, "openai", turns=turns)
    assert (result.stop_reason, result.text, result.tokens_used) == ("answered", "the answer", 3)
    assert fake_llm.calls == []


def test_the_offline_provider_works_the_tools_deterministically_and_says_so(acme, sarah):
    first = loop(sarah, "offline", tools=[ROSTER, "recommend_delegate"])
    second = loop(sarah, "offline", tools=[ROSTER, "recommend_delegate"])
    assert first.turns == second.turns
    assert first.stop_reason == "answered" and first.tokens_used == 0
    # recommend_delegate needs an expertise: the offline model calls only what needs no argument.
    assert [(t["id"], t["name"], t["status"]) for t in first.tool_calls] == [
        ("offline-call-1", ROSTER, "ok"),
    ]
    assert first.turns[0]["text"].startswith("[offline provider")
    assert f"- Consulted {ROSTER}: answered." in first.text
    assert "no language model was called" in first.text


def test_openai_strict_mode_sends_every_param_required_and_nullable(acme, fake_llm):
    schema = REGISTRY[ROSTER].input_schema
    provider_complete(
        "openai",
        LLMRequest(
            system="",
            prompt="",
            model="m",
            label="strict",
            strict_tools=True,
            messages=[Message.user("hi")],
            tools=[ToolSpec(ROSTER, "roster", schema)],
        ),
    )
    (sent,) = fake_llm.calls_for(agent="strict")[0].body["tools"]
    assert sent["function"]["strict"] is True
    parameters = sent["function"]["parameters"]
    assert parameters == strict_schema(schema)
    assert sorted(parameters["required"]) == sorted(schema["properties"])
    assert parameters["additionalProperties"] is False
    assert parameters["properties"]["expertise"]["type"] == ["string", "null"]


def test_a_plain_completion_sends_no_tools(acme, fake_llm):
    for provider in ("openai", "anthropic"):
        reply = provider_complete(provider, request(label=provider))
        call = fake_llm.calls_for(agent=provider)[0]
        assert "tools" not in call.body and call.tool_names == []
        assert reply.tool_calls == [] and reply.stop_reason == "stop"
    assert fake_llm.calls_for(agent="anthropic")[0].body["messages"] == [
        {"role": "user", "content": "Who can help with PostgreSQL?"}
    ]
