"""A specialist with tools (`agents[].config.tools`): its answer comes out of a tool loop,
run as the agent it is (or the starter, for an ad-hoc one), each turn written as it happens so a
timed-out or resumed agent keeps what it did.
"""

from collections.abc import Callable

from django.conf import settings

from ..models import Contribution, ContributionStatus
from ..providers import LLMReply, LLMRequest, ProviderTimeout
from ..selectors import specialist_caller
from ..toolloop import LoopStop, TurnKind, run_tool_loop
from .context import RunContext, Slot


class AgentFailed(Exception):
    """An agent ended without an answer, not by a crash: the message is its error, and what it
    did and spent (`reply`'s tokens, `turns`) is kept on its contribution."""

    def __init__(
        self,
        message: str,
        *,
        reply: LLMReply | None = None,
        turns: list[dict] | None = None,
        timed_out: bool = False,
    ):
        super().__init__(message)
        self.reply, self.turns, self.timed_out = reply, turns, timed_out


def tools_of(contribution: Contribution) -> list[str]:
    return list((contribution.config or {}).get("tools") or [])


def ask_with_tools(
    ctx: RunContext,
    slot: Slot,
    provider: str,
    request: LLMRequest,
    complete: Callable[[LLMRequest], LLMReply],
) -> tuple[LLMReply, list[dict]]:
    """The specialist's answer and its turns; raises AgentFailed when it has none."""
    contribution = slot.contribution
    caller = specialist_caller(ctx.session, contribution)
    if caller is None:
        raise AgentFailed(
            f"{contribution.agent_key}'s tools run as the session's starter "
            f"({ctx.session.created_by}), who can no longer act in this organization."
        )
    max_turns = settings.COLLAB_AGENT_MAX_TURNS
    result = run_tool_loop(
        caller,
        provider=provider,
        request=request,
        tool_names=tools_of(contribution),
        max_turns=max_turns,
        complete=complete,
        on_turn=TurnRecorder(contribution),
        turns=contribution.turns or None,
    )
    if result.stop_reason == LoopStop.ANSWERED:
        return result.reply(), result.turns
    if result.stop_reason == LoopStop.MAX_TURNS:
        message = (
            f"no answer after {max_turns} model turns (COLLAB_AGENT_MAX_TURNS): "
            "the tool calls of its last turn were not run"
        )
    else:
        message = result.error
    raise AgentFailed(
        message,
        reply=result.reply(),
        turns=result.turns,
        timed_out=isinstance(result.exception, ProviderTimeout),
    )


class TurnRecorder:
    """`on_turn` of a specialist's loop: upserts the turn into the contribution's `turns`, with
    the tokens of its model turns so far, only while the contribution is running."""

    def __init__(self, contribution: Contribution):
        self.contribution = contribution
        self.turns = list(contribution.turns or [])

    def __call__(self, turn: dict) -> None:
        index = turn["index"]
        if index < len(self.turns):
            self.turns[index] = turn
        else:
            self.turns.append(turn)
        models = [t for t in self.turns if t["kind"] == TurnKind.MODEL]
        prompt = sum(t["prompt_tokens"] for t in models)
        completion = sum(t["completion_tokens"] for t in models)
        written = Contribution.objects.filter(
            pk=self.contribution.pk, status=ContributionStatus.RUNNING
        ).update(
            turns=self.turns,
            prompt_tokens=prompt,
            completion_tokens=completion,
            tokens_used=prompt + completion,
        )
        if not written:
            # Timed out or cancelled meanwhile (settled by the session thread): stop here,
            # rather than spend more tokens and run more tools for an answer no one takes.
            raise AgentFailed(f"{self.contribution.agent_key} is no longer running")
