"""The tool loop: a model works with the registry's tools, as one caller, until it answers.

`run_tool_loop` offers the model the registry's tools that `caller` may use, narrowed to an
allow-list; runs every tool call the model asks for with `registry.call_tool(caller, …)` — as
that caller, through the same services and rules as every other door —; feeds each result back,
a refusal as the tool's error in our one error shape (`{"success": false, "error", "code"}`) so
the model may choose again; and calls the model again, until it answers without tool calls
(`answered`), has had `max_turns` model calls (`max_turns`: the calls of that last turn are not
run), or the provider fails after the SDK's own retries (`provider_error`). Which of these is a
failure is the caller's business: the loop returns a `ToolLoopResult` and never raises a
provider's error.

Every step is a turn, a JSON-able dict typed in providers/turns.py, in order (`ToolLoopResult.turns`):

- a model turn: `{"kind": "model", "index", "text", "tool_calls": [{id, name, arguments}],
  "stop_reason", "prompt_tokens", "completion_tokens", "attempts", "provider", "model"}`;
- a tool call: `{"kind": "tool_call", "index", "id", "name", "arguments", "status"}` with
  `status` `running` (it is being run), `ok` (and its `result`) or `error` (and `error`, the
  error body the model was given).

A durable caller records them with `on_turn(turn)`, called with a copy of each model turn once
the reply is in, and of each tool call twice: before it runs (`running`) and after (`ok` /
`error`); a turn's `index` is its place in the list, so recording is an upsert by index.
Passing the recorded turns back (`turns=`) resumes the loop without doing again what was done:
the conversation is rebuilt from them, calls recorded `ok` / `error` are not run again, and a
call recorded `running` (the process died during it) is run again only if its tool is read-only
or idempotent — otherwise the model is told its outcome is unknown (`tool_interrupted`).

`atomic_record=True` closes that gap for a caller whose `on_turn` writes to the same database: a
call is then recorded once, with its outcome, inside the call's own transaction, so the call's
writes and its record commit together or not at all — a call of a model turn with no record never
took effect, and is run again on resume whatever its tool (as is one still recorded `running` by
an earlier version); an `on_turn` that raises there (a run that lost its lease) undoes the call's
writes too. A refused call's writes are undone whole, and its refusal recorded on its own. Each
call's turn then also says when the call started (`started_at`) and how long it ran (`ms`).

A read-only call has nothing to commit with its record: with `atomic_record` it runs outside any
transaction and its record waits, with those of the read-only calls after it, until the next
writing call or the next model call; `on_turns(turns)`, when given, records such a batch at once
(else `on_turn` each). A read-only call whose record was lost with its process simply runs again
on resume. A director that reads a hundred recommendations before delegating records them in one
statement instead of a hundred transactions.
"""

import contextlib
import copy
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from django.core.serializers.json import DjangoJSONEncoder
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from infrastructure.atomic import undone_whole
from infrastructure.errors import DomainError, error_body
from organization import registry
from organization.caller import Caller

from . import providers
from .providers import LLMReply, LLMRequest, Message, ProviderError, ToolCall, ToolSpec
from .providers.turns import (
    CallStatus,
    ModelTurn,
    ToolCallTurn,
    Turn,
    TurnKind,
    model_turn,
    model_turns,
    succeeded_calls,
    tool_call_turns,
)

log = logging.getLogger(__name__)

# A tool's result longer than this is cut before it goes to the model (a big organization's
# roster); the turn keeps the whole result.
MAX_RESULT_CHARS = 20_000
# A call undone by a transient database error (a deadlock) is tried again this many times in
# all, waiting TRANSIENT_BACKOFF x 2^n seconds in between.
TRANSIENT_ATTEMPTS = 3
# SQLSTATEs of a transaction PostgreSQL rolled back itself: serialization failure, deadlock.
ROLLED_BACK_STATES = {"40001", "40P01"}
TRANSIENT_BACKOFF = 0.05


class LoopStop(StrEnum):
    ANSWERED = "answered"
    MAX_TURNS = "max_turns"
    PROVIDER_ERROR = "provider_error"
    # A call of a tool that ends the turn (`Tool.ends_turn`: ask_human) succeeded.
    WAITING = "waiting"


@dataclass
class ToolLoopResult:
    """What the loop did: the final text (the last model turn's), every turn in order, the
    tokens and HTTP attempts of all its model calls, and why it stopped."""

    text: str
    turns: list[Turn]
    stop_reason: str
    # The provider's error message when stop_reason is provider_error.
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    provider: str = ""
    model: str = ""
    # The provider's exception (a ProviderTimeout tells the agent's time ran out); not JSON.
    exception: ProviderError | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def tool_calls(self) -> list[ToolCallTurn]:
        """The tool-call turns, in order."""
        return tool_call_turns(self.turns)

    def reply(self) -> LLMReply:
        """The loop as one reply: its text, summed usage and attempts."""
        return LLMReply(
            text=self.text,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            attempts=self.attempts,
            provider=self.provider,
            model=self.model,
        )

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens_used": self.tokens_used,
            "attempts": self.attempts,
            "provider": self.provider,
            "model": self.model,
            "turns": self.turns,
        }


def offered_tools(caller: Caller, tool_names: Iterable[str]) -> list[registry.Tool]:
    """The tools of `tool_names` that `caller` may use, in the registry's order (by name).

    A name the registry no longer knows, or that the caller may not use, is left out: the model
    is offered what it can call, and refused (as a tool error) what it calls anyway.
    """
    allowed = set(tool_names)
    return [tool for tool in registry.tools_for(caller) if tool.name in allowed]


def tool_spec(tool: registry.Tool) -> ToolSpec:
    return ToolSpec(name=tool.name, description=tool.description, input_schema=tool.input_schema)


def run_tool_loop(
    caller: Caller,
    *,
    provider: str,
    request: LLMRequest,
    tool_names: Iterable[str],
    max_turns: int,
    complete: Callable[[LLMRequest], LLMReply] | None = None,
    on_turn: Callable[[Turn], None] | None = None,
    turns: list[Turn] | None = None,
    atomic_record: bool = False,
    on_turns: Callable[[list[Turn]], None] | None = None,
) -> ToolLoopResult:
    """Run the model of `request` (its system prompt, its prompt or messages, model,
    temperature, max_tokens, deadline) with the tools `tool_names` as `caller`.

    `complete(request) -> LLMReply` makes one model call (default: `providers.complete` on
    `provider`); a caller with a budget passes its own. `on_turn`, `turns`, `atomic_record` and
    `on_turns`: the module's docstring. `on_turn` may raise to stop the loop (the exception propagates).
    """
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    complete = complete or (lambda r: providers.complete(provider, r))
    tools = offered_tools(caller, tool_names)
    offered = {tool.name: tool for tool in tools}
    specs = [tool_spec(tool) for tool in tools]
    loop = _Loop(
        caller, offered, on_turn, copy.deepcopy(list(turns or [])), atomic_record, on_turns
    )
    messages = loop.rebuild(request.conversation())

    while True:
        last = loop.last_model_turn()
        if last is not None:
            if not last["tool_calls"]:
                return loop.result(LoopStop.ANSWERED)
            if loop.model_turns() >= max_turns:
                return loop.result(LoopStop.MAX_TURNS)
            messages += loop.run_calls(last)
            if loop.ended_turn(last):
                return loop.result(LoopStop.WAITING)
        try:
            reply = complete(replace(request, messages=list(messages), tools=specs))
        except ProviderError as exc:
            return loop.result(LoopStop.PROVIDER_ERROR, exc)
        turn = loop.add(model_turn(reply))
        loop.notify(turn)
        messages.append(Message.assistant(reply.text, reply.tool_calls))


class _Loop:
    """The turns of one loop, and what running a call means for them."""

    def __init__(
        self,
        caller,
        offered,
        on_turn,
        turns: list[Turn],
        atomic_record: bool = False,
        on_turns=None,
    ):
        self.caller, self.offered, self.on_turn, self.turns = caller, offered, on_turn, turns
        self.atomic_record, self.on_turns = atomic_record, on_turns
        # Read-only calls run and not recorded yet (atomic_record: the module's docstring).
        self.unrecorded: list[ToolCallTurn] = []
        for index, turn in enumerate(turns):
            turn["index"] = index

    def add(self, turn: Turn) -> Turn:
        turn["index"] = len(self.turns)
        self.turns.append(turn)
        return turn

    def notify(self, turn: Turn) -> None:
        if self.on_turn is not None:
            self.on_turn(copy.deepcopy(turn))

    def record_read_only(self) -> None:
        """Record the read-only calls run since the last record, in one go."""
        turns, self.unrecorded = self.unrecorded, []
        if not turns:
            return
        if self.on_turns is not None:
            self.on_turns(copy.deepcopy(turns))
        else:
            for turn in turns:
                self.notify(turn)

    def model_turns(self) -> int:
        return len(model_turns(self.turns))

    def last_model_turn(self) -> ModelTurn | None:
        models = model_turns(self.turns)
        return models[-1] if models else None

    def rebuild(self, start: list[Message]) -> list[Message]:
        """The conversation so far: the request's, then the recorded turns. A call still
        `running` gets its result message when `run_calls` settles it."""
        messages = list(start)
        for turn in self.turns:
            if turn["kind"] == TurnKind.MODEL:
                calls = [ToolCall.from_dict(c) for c in turn["tool_calls"]]
                messages.append(Message.assistant(turn["text"], calls))
            elif turn["status"] != CallStatus.RUNNING:
                messages.append(_result_message(turn))
        return messages

    def ended_turn(self, model_turn: ModelTurn) -> bool:
        """A call of `model_turn` to a tool that ends the turn succeeded."""
        ids = {c["id"] for c in model_turn["tool_calls"]}
        return any(
            turn["id"] in ids
            and self.offered.get(turn["name"])
            and self.offered[turn["name"]].ends_turn
            for turn in succeeded_calls(self.turns[model_turn["index"] + 1 :])
        )

    def run_calls(self, model_turn: ModelTurn) -> list[Message]:
        """Run the calls of `model_turn` not done yet; their results' messages, in call order.

        The results of calls done in an earlier run are in the conversation already."""
        after = self.turns[model_turn["index"] + 1 :]
        recorded = {t["id"]: t for t in tool_call_turns(after)}
        messages = []
        for data in model_turn["tool_calls"]:
            call = ToolCall.from_dict(data)
            turn = recorded.get(call.id)
            if turn is not None and turn["status"] != CallStatus.RUNNING:
                continue
            if turn is None:
                turn = self.add(
                    {
                        "kind": TurnKind.TOOL_CALL,
                        "id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                        "status": CallStatus.RUNNING,
                    }
                )
                if not self.atomic_record:
                    self.notify(turn)  # recorded before it runs: see the module's docstring
                self.settle(turn, call)
            elif self.atomic_record or self.may_run_again(call.name):
                self.settle(turn, call)
            else:
                turn.update(_interrupted(call.name))
                self.notify(turn)
            messages.append(_result_message(turn))
        self.record_read_only()  # before the next model call
        return messages

    def settle(self, turn: ToolCallTurn, call: ToolCall) -> None:
        """Run the call and record its outcome; with `atomic_record`, in one transaction (a
        read-only call: none, its record waits for the next batch).

        A transient database error PostgreSQL undid whole (a deadlock, a serialization failure)
        is tried again, a few times, before the model is told it failed; so is a read-only call
        on any database error. A writing call whose connection was lost is not: it may have
        committed (the COMMIT's answer lost on the way back), so the model is told its outcome
        is unknown, as for a call a crash interrupted."""
        read_only = self.atomic_record and self.may_run_again(call.name, read_only=True)
        if not read_only:
            self.record_read_only()  # a writing call's record never precedes those before it
        for attempt in range(TRANSIENT_ATTEMPTS):
            try:
                if read_only:
                    self.run_read_only(turn, call)
                    return
                if not self.atomic_record:
                    turn.update(self.execute(call))
                elif self.settle_atomically(turn, call):
                    return
                break
            except OperationalError as exc:
                if not undone_for_sure(exc):
                    connection.close()  # broken: what follows takes a new one
                    if not self.may_run_again(call.name, read_only=True):
                        log.warning(
                            "tool %s for %s: the database connection was lost; outcome unknown",
                            call.name,
                            self.caller.label,
                            exc_info=True,
                        )
                        turn.update(_interrupted(call.name))
                        break
                log.warning(
                    "tool %s for %s: transient database error (attempt %d)",
                    call.name,
                    self.caller.label,
                    attempt + 1,
                    exc_info=True,
                )
                time.sleep(TRANSIENT_BACKOFF * 2**attempt)
        else:
            turn.update(_refusal("The tool failed on a database error; try again.", "server_error"))
        if read_only:
            self.unrecorded.append(turn)
        else:
            self.notify(turn)

    def run_read_only(self, turn: ToolCallTurn, call: ToolCall) -> None:
        started_at, started = timezone.now(), time.perf_counter()
        outcome = self.execute(call, own_transaction=False)
        turn.update(outcome, **_timing(started_at, started))
        self.unrecorded.append(turn)

    def settle_atomically(self, turn: ToolCallTurn, call: ToolCall) -> bool:
        """Run the call and record its outcome in one transaction; True when it did. A refused
        call is undone whole (no savepoint around the call: one transaction, fewer statements),
        then False: `settle` records the refusal on its own."""
        with undone_whole():
            started_at, started = timezone.now(), time.perf_counter()
            outcome = self.execute(call, own_transaction=False)
            turn.update(outcome, **_timing(started_at, started))
            if outcome["status"] != CallStatus.OK:
                transaction.set_rollback(True)
                return False
            self.notify(turn)
        return True

    def may_run_again(self, name: str, *, read_only: bool = False) -> bool:
        """The tool may run again after a crash: it is read-only (or, unless `read_only`,
        idempotent)."""
        tool = registry.REGISTRY.get(name)
        return tool is not None and (tool.read_only or (tool.idempotent and not read_only))

    def execute(self, call: ToolCall, *, own_transaction: bool = True) -> dict:
        """Run one call as the caller: `{"status": "ok", "result"}` or `{"status": "error",
        "error"}` (the error body the model is given). With `own_transaction`, a refused call
        leaves nothing written; without, the caller's transaction must be undone on a refusal."""
        if call.invalid_arguments is not None:
            return _refusal(
                f"The arguments of {call.name} are not a usable JSON object: {call.invalid_arguments[:200]}",
                "invalid_arguments",
            )
        if call.name not in self.offered:
            return _refusal(f"No tool {call.name!r} is offered to you.", "unknown_tool")
        try:
            # As one request at the REST door: a refused call leaves nothing half-written.
            with undone_whole() if own_transaction else contextlib.nullcontext():
                result = registry.call_tool(self.caller, call.name, call.arguments, call_id=call.id)
        except DomainError as exc:
            return _refusal(exc.message, exc.code)
        except OperationalError:
            raise  # transient: `settle` tries the call again
        except Exception:
            log.exception("tool %s failed for %s", call.name, self.caller.label)
            return _refusal("The tool failed unexpectedly; the error was logged.", "server_error")
        # JSON-able as the turns must be (datetimes, UUIDs and decimals as the API writes them).
        return {"status": CallStatus.OK, "result": json.loads(_json(result))}

    def result(self, stop: str, exc: ProviderError | None = None) -> ToolLoopResult:
        models = model_turns(self.turns)
        last = models[-1] if models else {}
        return ToolLoopResult(
            text=last.get("text", ""),
            turns=self.turns,
            stop_reason=stop,
            error=str(exc) if exc is not None else "",
            prompt_tokens=sum(t["prompt_tokens"] for t in models),
            completion_tokens=sum(t["completion_tokens"] for t in models),
            attempts=sum(t["attempts"] for t in models),
            provider=last.get("provider", ""),
            model=last.get("model", ""),
            exception=exc,
        )


def _timing(started_at, started: float) -> dict:
    """When a call started and how long it ran (ms), for its turn."""
    return {
        "started_at": started_at.isoformat(),
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


def _refusal(message: str, code: str) -> dict:
    return {"status": CallStatus.ERROR, "error": error_body(message, code)}


def _interrupted(name: str) -> dict:
    return _refusal(
        f"The call of {name} was interrupted and its outcome is unknown: check before calling "
        "it again.",
        "tool_interrupted",
    )


def undone_for_sure(exc: OperationalError) -> bool:
    """The database undid the transaction itself (its work may run again): PostgreSQL's deadlock
    or serialization failure, SQLite's busy database. Not a lost connection: a COMMIT sent may
    have committed though its answer never came back."""
    cause = exc.__cause__
    if isinstance(cause, sqlite3.OperationalError):
        return "locked" in str(cause) or "busy" in str(cause)
    return getattr(cause, "sqlstate", None) in ROLLED_BACK_STATES


def _json(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def _result_message(turn: ToolCallTurn) -> Message:
    """A recorded call's result as the model reads it: the result's JSON, or the error body."""
    failed = turn["status"] == CallStatus.ERROR
    text = _json(turn["error"] if failed else turn["result"])
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"… [cut: {len(text)} characters in all]"
    return Message.tool_result(turn["id"], text, is_error=failed)
