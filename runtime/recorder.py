"""A run's `on_turn`: records each turn under the run's lease and meters each model call."""

from __future__ import annotations

import time

from collaboration import providers
from collaboration.providers import BudgetRefused, LLMReply, LLMRequest, slots
from collaboration.providers.turns import Turn, TurnKind, tokens_of
from costs.metering import Meter, task_ancestry
from costs.models import UsagePurpose
from infrastructure.prepared import update_where

from . import services
from .models import Run
from .stops import AgentMadeExternal, AgentPaused, LeaseLost, WaitForHeadroom


class TurnRecorder:
    """`on_turn` of a run: writes each turn (a model turn with how long its provider call took)
    and the tokens so far; raises LeaseLost when the run is no longer this worker's."""

    def __init__(self, run: Run, token: str):
        self.run, self.token = run, token
        # Each model call of the run goes through the ledger as the agent, for the run's task;
        # it works every task of its input, so each one's task budgets (and its parents') must
        # have room, not only the first trigger's (a task whose budget was out rode along).
        tasks = dict.fromkeys([run.task_id, *(t["id"] for t in run.context.get("tasks", []))])
        tree = dict.fromkeys(chain for task_id in tasks for chain in task_ancestry(task_id))
        self.meter = Meter.for_agent(
            run.agent,
            UsagePurpose.RUN,
            run_id=run.pk,
            task_id=run.task_id,
            task_tree=tuple(tree),
        )
        # What an earlier attempt recorded: a turn is recorded under a lease, so a run's first
        # attempt has none to read.
        self.turns = run.turns if run.attempts > 1 else []
        self.last_ms = 0.0
        # Read with each record (no statement of its own): a human paused the agent. It starts
        # as the claim read it: a running run sent again (its worker died) after its agent was
        # paused is claimed, not held as a queued one is, and must not call the model either.
        self.agent_paused = bool(run.agent.is_paused)
        # Read with it: the agent was made external meanwhile (two drivers acting as one agent).
        self.agent_external = not run.agent.is_managed

    def complete(self, request: LLMRequest) -> LLMReply:
        if self.agent_external:
            raise AgentMadeExternal
        if self.agent_paused:
            raise AgentPaused
        started = time.perf_counter()
        try:
            with slots.waiting(self._waiting):
                return providers.complete(self.run.provider, request, meter=self.meter)
        except BudgetRefused as exc:
            if getattr(exc.__cause__, "held_only", False):
                raise WaitForHeadroom(str(exc)) from exc
            raise
        finally:
            self.last_ms = (time.perf_counter() - started) * 1000

    def _waiting(self, reason: str) -> None:
        """The run says what its model call waits for (a model slot, a rate limit), or "" again."""
        update_where(Run, {"pk": self.run.pk, "lease_token": self.token}, waiting_for=reason)

    def __call__(self, turn: Turn) -> None:
        # A tool call's turn says how long it ran (`ms`, the loop measures it).
        if turn["kind"] == TurnKind.MODEL and "provider_ms" not in turn:
            turn["provider_ms"] = round(self.last_ms, 1)
        self._keep([turn])
        recorded = services.run_record_turn(
            run=self.run, token=self.token, turn=turn, **self._tokens()
        )
        self._recorded(recorded)

    def record_many(self, turns: list[Turn]) -> None:
        """`on_turns`: read-only calls' turns, in one statement."""
        self._keep(turns)
        recorded = services.run_record_turns(
            run=self.run, token=self.token, turns=turns, **self._tokens()
        )
        self._recorded(recorded)

    def _recorded(self, recorded: services.Recorded | None) -> None:
        if recorded is None:
            raise LeaseLost
        self.agent_paused = recorded.agent_paused
        self.agent_external = recorded.agent_external

    def _keep(self, turns: list[Turn]) -> None:
        for turn in turns:
            index = turn["index"]
            if index < len(self.turns):
                self.turns[index] = turn
            else:
                self.turns.append(turn)

    def _tokens(self) -> dict:
        prompt_tokens, completion_tokens = tokens_of(self.turns)
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
