"""One run of a managed agent, on a worker: claim it, drive the model with the tools, settle it.

`run_agent(run_id)` claims the run's lease (lease.py), builds its input the first time
(context.py), and runs `collaboration.toolloop.run_tool_loop` as the agent — the registry's tools
(narrowed to its allow-list), the same services and rules as every door — with its LLM settings.
Each turn is recorded on the run as it happens; a tool call is recorded once, with its outcome, in
the call's own transaction (`atomic_record`), so a call either took effect and is recorded, or did
neither and runs again on resume: no task event is ever written twice, and a worker that lost its
lease cannot commit a call at all. Then the run is settled:

- the model answered: each task of the run the agent still holds, assigned or in progress, with no
  open subtasks and on which the run did nothing (no successful writing call naming it), is
  completed with the final answer as its result (blocked, and the run failed, when the answer
  has no text: nothing to complete it with);
- `max_turns` or a provider error (after the SDK's retries): each task the agent still holds,
  assigned or in progress, is blocked with the reason in its note ("Needs attention"), and the
  run fails with the error;
- a model call refused only for money that calls under way hold (it fits what its budgets have
  not spent): the run goes back to `queued`, its turns kept, "waiting for budget headroom", and
  its Celery task sends it again after a back-off (`WAITING`);

and ended (`services.run_finish`), which starts the follow-up if triggers arrived meanwhile.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from collaboration import providers
from collaboration.providers import BudgetRefused, LLMReply, LLMRequest, Purpose
from collaboration.toolloop import CallStatus, LoopStop, TurnKind, run_tool_loop
from costs.metering import Meter, task_ancestry
from costs.models import UsagePurpose
from infrastructure.atomic import DATABASE_GONE, once_reconnected, undone_whole
from infrastructure.errors import DomainError
from infrastructure.prepared import INT, INT2, PreparedQuerySet, among
from organization import registry
from organization.caller import caller_for_agent
from tasks import services as task_services
from tasks.models import FINISHED_STATUSES, EventKind, Task, TaskEvent, TaskStatus
from tasks.rules import Actor

from . import context, services
from .lease import CLAIMED, claim, heartbeats
from .models import Run, RunStatus

log = logging.getLogger(__name__)

# A managed agent's completion budget per model call when its max tokens are not set.
DEFAULT_MAX_TOKENS = 1024
# The tasks a run may settle (complete or block): the agent still holds them, not blocked.
SETTLEABLE = (TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS)


# Why a task the run would have completed with the model's final answer is blocked instead.
NO_ANSWER = (
    "The model stopped with no final answer (no text and no tool call): nothing to complete "
    "the task with."
)


class LeaseLost(Exception):
    """Another worker took the run over (this one was too slow to renew): stop at once."""


class AgentPaused(Exception):
    """A human paused the agent while its run was under way: stop before the next model call."""


class WaitForHeadroom(Exception):
    """A model call did not fit only because calls under way hold its budgets' money: the run
    waits for them to settle rather than fail."""


# What `run_agent` answers for a run that waits for budget headroom (its task retries it).
WAITING = "waiting"


class AgentMadeExternal(Exception):
    """The agent was made external while its run was under way ("we run it ourselves now"):
    stop before the next model call, and end the run, its tasks left as they are."""


def run_agent(run_id: int) -> str:
    """Run (or resume) the run; returns what the delivery found (lease.CLAIMED, BUSY, …)."""
    token = uuid.uuid4().hex
    outcome, run = claim(run_id, token)
    if outcome != CLAIMED:
        return outcome
    heartbeats.hold(token)
    try:
        if run.attempts > settings.RUNTIME_MAX_ATTEMPTS:
            _give_up(run, token)
        else:
            execute(run, token)
    except LeaseLost:
        log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except AgentMadeExternal:
        log.info("run %s: its agent was made external; the run ends here", run_id)
        _end_made_external(run, token)
    except AgentPaused:
        log.info("run %s: its agent was paused; handed back until it is resumed", run_id)
        if not services.run_hand_back(run=run, token=token):
            log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except WaitForHeadroom as exc:
        log.info("run %s waits for budget headroom: %s", run_id, exc)
        if services.run_wait_for_headroom(run=run, token=token, reason=str(exc)):
            return WAITING
        log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    except DATABASE_GONE:
        # The database went away under the run (a restart, a failover): the run is not at
        # fault. Its lease is handed back and the error raised, so that the task runs it again
        # at once, resuming it from its recorded turns (not failed, not left for the sweep).
        log.exception("run %s lost its database; it will resume", run_id)
        once_reconnected(
            lambda: Run.objects.filter(pk=run_id, lease_token=token).update(lease_token="")
        )
        raise
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        # acks_late would otherwise ack a crashed run and leave it "running" until the sweep.
        connection.close()  # it may be what broke
        try:
            _settle_failed(run, token, f"internal error: {type(exc).__name__}: {exc}"[:2000])
        except LeaseLost:
            log.warning("run %s: the lease was lost to another worker; stopping here", run_id)
    finally:
        heartbeats.release(token)
    return CLAIMED


def _end_made_external(run: Run, token: str) -> None:
    """The agent was made external while its run was under way: the run ends before its next
    model call, failed with the reason (`services.MADE_EXTERNAL`), its tasks left as they are
    for the external driver (made managed again, the agent is woken for those it never
    started)."""
    if not services.run_finish(
        run=run, token=token, status=RunStatus.FAILED, error=services.MADE_EXTERNAL,
        outcome=[{"task": t["id"], "action": "none", "why": "its agent was made external"}
                 for t in run.context.get("tasks", [])],
    ):  # fmt: skip
        log.warning("run %s: the lease was lost to another worker; stopping here", run.pk)


def _give_up(run: Run, token: str) -> None:
    """The run was started RUNTIME_MAX_ATTEMPTS times and never finished: whatever stops it
    (a crash that kills its worker, the time limit) would stop it again. Fail it and block its
    tasks, as for a provider error; if blocking them is what fails, the run is failed anyway."""
    error = (
        f"Given up after {run.attempts - 1} starts that did not finish: its worker crashed, "
        "was killed or reached RUNTIME_RUN_TIME_LIMIT each time (RUNTIME_MAX_ATTEMPTS)."
    )
    log.error("run %s: %s", run.pk, error)
    try:
        _settle_failed(run, token, error)
    except (LeaseLost, DATABASE_GONE):
        raise
    except Exception:
        log.exception("run %s: its tasks could not be blocked", run.pk)
        connection.close()
        services.run_finish(run=run, token=token, status=RunStatus.FAILED, error=error)


def llm_settings(agent) -> tuple[str, str, float | None, int]:
    """The agent's provider, model, temperature and max tokens (defaults where unset)."""
    provider = agent.llm_provider or providers.default_provider_name()
    model = agent.llm_model or providers.default_model_for(provider)
    return provider, model, agent.llm_temperature, agent.llm_max_tokens or DEFAULT_MAX_TOKENS


# Never offered to a managed run: the service meters its model calls itself, so a report of its
# own would count them twice (or book whatever the model claims).
NOT_FOR_MANAGED_RUNS = frozenset({"report_usage"})


def tool_names_of(agent) -> list[str]:
    """The tools the agent is offered: its allow-list, or every tool of the registry, less
    those no managed run is offered."""
    names = list(agent.allowed_tools) if agent.allowed_tools else sorted(registry.REGISTRY)
    return [name for name in names if name not in NOT_FOR_MANAGED_RUNS]


def prepare(run: Run, token: str) -> None:
    """Fix what the model is given, the first time the run starts."""
    if run.input:
        return
    provider, model, _, _ = llm_settings(run.agent)
    run.system_prompt, run.input, run.context = context.build(run)
    run.provider, run.model, run.max_turns = provider, model, run.agent.max_turns
    fields = ["system_prompt", "input", "context", "provider", "model", "max_turns"]
    if not Run.objects.filter(pk=run.pk, lease_token=token).update(
        **{f: getattr(run, f) for f in fields}
    ):
        raise LeaseLost


def execute(run: Run, token: str) -> None:
    agent = run.agent
    if not agent.is_managed and run.input:
        # Sent again (its worker died) after its agent was made external under way.
        _end_made_external(run, token)
        return
    if not agent.is_managed:
        services.run_finish(
            run=run, token=token, status=RunStatus.FAILED,
            error="The agent is no longer managed (its runtime is external): nothing was run.",
        )  # fmt: skip
        return
    prepare(run, token)
    if not any(t.get("status") not in FINISHED_STATUSES for t in run.context.get("tasks", [])):
        # Every task it was woken for is finished (or gone): no model call is worth making.
        services.run_finish(run=run, token=token, status=RunStatus.COMPLETED, outcome=[
            {"task": t["id"], "action": "none", "why": f"the task is {t['status']}"}
            for t in run.context.get("tasks", [])
        ])  # fmt: skip
        return
    _, _, temperature, max_tokens = llm_settings(agent)
    request = LLMRequest(
        system=run.system_prompt, prompt=run.input, model=run.model, temperature=temperature,
        max_tokens=max_tokens, purpose=Purpose.RUN, label=agent.handle,
    )  # fmt: skip
    recorder = TurnRecorder(run, token)
    # Whom the run's moves wake (another managed agent) is told it was this run.
    reset = services.current_run.set(run.pk)
    try:
        result = run_tool_loop(
            caller_for_agent(agent),
            provider=run.provider,
            request=request,
            tool_names=tool_names_of(agent),
            max_turns=run.max_turns or agent.max_turns,
            complete=recorder.complete,
            on_turn=recorder,
            turns=recorder.turns or None,
            atomic_record=True,
            on_turns=recorder.record_many,
        )
        settle(run, token, result)
    finally:
        services.current_run.reset(reset)


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
            run.agent, UsagePurpose.RUN, run_id=run.pk, task_id=run.task_id, task_tree=tuple(tree),
        )  # fmt: skip
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
            return providers.complete(self.run.provider, request, meter=self.meter)
        except BudgetRefused as exc:
            if getattr(exc.__cause__, "held_only", False):
                raise WaitForHeadroom(str(exc)) from exc
            raise
        finally:
            self.last_ms = (time.perf_counter() - started) * 1000

    def __call__(self, turn: dict) -> None:
        # A tool call's turn says how long it ran (`ms`, the loop measures it).
        if turn["kind"] == TurnKind.MODEL and "provider_ms" not in turn:
            turn["provider_ms"] = round(self.last_ms, 1)
        self._keep([turn])
        self._recorded(services.run_record_turn(
            run=self.run, token=self.token, turn=turn, **self._tokens()
        ))  # fmt: skip

    def record_many(self, turns: list[dict]) -> None:
        """`on_turns`: read-only calls' turns, in one statement."""
        self._keep(turns)
        self._recorded(services.run_record_turns(
            run=self.run, token=self.token, turns=turns, **self._tokens()
        ))  # fmt: skip

    def _recorded(self, recorded: services.Recorded | None) -> None:
        if recorded is None:
            raise LeaseLost
        self.agent_paused = recorded.agent_paused
        self.agent_external = recorded.agent_external

    def _keep(self, turns: list[dict]) -> None:
        for turn in turns:
            index = turn["index"]
            if index < len(self.turns):
                self.turns[index] = turn
            else:
                self.turns.append(turn)

    def _tokens(self) -> dict:
        models = [t for t in self.turns if t["kind"] == TurnKind.MODEL]
        return {
            "prompt_tokens": sum(t["prompt_tokens"] for t in models),
            "completion_tokens": sum(t["completion_tokens"] for t in models),
        }


def _only_starts(turn: dict) -> bool:
    """The call moved its task to in_progress, and nothing more: starting a task (as the run's
    guide says to) is not doing something with it; its final answer is still its result."""
    status = turn["arguments"].get("status")
    return turn["name"] == "update_task_status" and status == TaskStatus.IN_PROGRESS


def _acted_on(turns: list[dict]) -> set[int]:
    """The tasks a successful writing tool call of the run named (as task_id or parent), but
    for a call that only started its task."""
    named = set()
    for turn in turns:
        if turn["kind"] != TurnKind.TOOL_CALL or turn.get("status") != CallStatus.OK:
            continue
        tool = registry.REGISTRY.get(turn["name"])
        if tool is None or tool.read_only or _only_starts(turn):
            continue
        for key in ("task_id", "parent"):
            task_id = _as_task_id(turn["arguments"].get(key))
            if task_id is not None:
                named.add(task_id)
    return named


_WHOLE_DECIMAL = re.compile(r"\.0*\s*$")  # DRF's IntegerField.re_decimal


def _as_task_id(value) -> int | None:
    """An id as the tools' serializers (DRF's IntegerField) read it: 12, "12", 12.0, "12.0"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        value = _WHOLE_DECIMAL.sub("", value).strip()
        return int(value) if value.isdigit() else None
    return value if isinstance(value, int) else None


# Read at every run's end (compiled once: infrastructure/prepared.py).
_HELD = PreparedQuerySet(
    Task,
    lambda task_ids, agent_id: Task.objects.filter(
        among("pk", task_ids), assignee_id=agent_id, status__in=SETTLEABLE
    ).order_by("pk"),
    task_ids=[INT],
    agent_id=INT2,
)


def _held_tasks(run: Run) -> list[Task]:
    """The run's tasks the agent held when its model was shown them and still holds, assigned
    or in progress. Not one that reached it during the run (escalated to it, say): the model
    answered about it as someone else's, and a follow-up run works it. A run whose input was
    never stored (its worker died building it): the tasks of its triggers."""
    if run.context:
        ids = [t["id"] for t in run.context.get("tasks", []) if t.get("you_hold_it")]
    else:
        ids = [i for i in run.triggers.values_list("task_id", flat=True) if i is not None]
    return _HELD.instances(task_ids=ids, agent_id=run.agent_id)


def _open_subtasks(task: Task) -> int:
    return task.subtasks.exclude(status__in=FINISHED_STATUSES).count()


def _move(task: Task, actor: Actor, status: str, **kwargs) -> Task:
    """assigned → in_progress first when needed, then `status` (each a move of the agent)."""
    if task.status == TaskStatus.ASSIGNED:
        task = task_services.task_set_status(task=task, actor=actor, status=TaskStatus.IN_PROGRESS)
    return task_services.task_set_status(task=task, actor=actor, status=status, **kwargs)


def _settled_before(run: Run, turns: list[dict]) -> list[dict]:
    """What an earlier start of the run already did at its end (its worker died between
    settling a task and finishing the run), for the outcome: each task it completed or blocked,
    read from the tasks' audit trails (the move's note names the run). The follow-ups that end
    asked for are waiting triggers already. Nothing read on a first start."""
    if run.attempts < 2:
        return []
    ids = {t["id"] for t in run.context.get("tasks", [])} | {
        answer["id"]
        for turn in turns
        if turn["kind"] == TurnKind.TOOL_CALL and isinstance(answer := turn.get("result"), dict)
        and isinstance(answer.get("id"), int)
    }  # fmt: skip
    by_run = Q(notes__startswith=f"Managed run #{run.pk}:") | Q(
        notes__startswith=f"Managed run #{run.pk} stopped:"
    )
    rows = (
        TaskEvent.objects.filter(by_run, task_id__in=ids, actor_agent_id=run.agent_id)
        .filter(after__status__in=[TaskStatus.COMPLETED, TaskStatus.BLOCKED])
        .order_by("pk")
        .values_list("task_id", "after__status")
    )
    return [{"task": task_id, "action": status} for task_id, status in rows]


def settle(run: Run, token: str, result) -> None:
    actor = Actor.of(caller_for_agent(run.agent))
    # A resumed run: what its end had done before its worker died.
    outcome = _settled_before(run, result.turns)
    if result.stop_reason == LoopStop.ANSWERED:
        acted = _acted_on(result.turns)
        answer = (result.text or "").strip()
        # No text is no answer (empty content, or a reply cut at max_tokens before its text):
        # a task it would complete is blocked with the reason, not completed with no result.
        unanswered = False
        # A subtask its answer completes: its parent's subtasks_done is the agent's own act.
        settled_a_subtask = False
        for task in _held_tasks(run):
            if task.pk in acted:
                outcome.append({"task": task.pk, "action": "none", "why": "the run acted on it"})
            elif _open_subtasks(task):
                outcome.append({"task": task.pk, "action": "none", "why": "open subtasks"})
            elif not answer:
                unanswered = True
                _safely(run, token, outcome, task, lambda t=task: _move(
                    t, actor, TaskStatus.BLOCKED,
                    note=f"Managed run #{run.pk} stopped: {NO_ANSWER}",
                ), "blocked")  # fmt: skip
            else:
                _safely(run, token, outcome, task, lambda t=task: _move(
                    t, actor, TaskStatus.COMPLETED, result=answer[:20_000],
                    note=f"Managed run #{run.pk}: its final answer is the result.",
                ), "completed")  # fmt: skip
                settled_a_subtask |= task.parent_id is not None
        if settled_a_subtask or _finished_a_subtask(result.turns):
            _follow_up_parents_it_finished(run)
        _follow_up_what_it_took_on(run, token, outcome, actor, result.turns)
        if unanswered:
            services.run_finish(
                run=run, token=token, status=RunStatus.FAILED, error=NO_ANSWER, outcome=outcome
            )
        else:
            services.run_finish(run=run, token=token, status=RunStatus.COMPLETED, outcome=outcome)
        return
    if result.stop_reason == LoopStop.MAX_TURNS:
        error = (
            f"No final answer after {run.max_turns} model turns (max_turns): the tool calls of "
            "its last turn were not run."
        )
    else:
        error = f"The provider failed: {result.error}"
    _settle_failed(run, token, error, actor=actor, turns=result.turns, outcome=outcome)


def _settle_failed(
    run: Run,
    token: str,
    error: str,
    actor: Actor | None = None,
    turns: list[dict] | None = None,
    outcome: list | None = None,
) -> None:
    """Block the tasks the agent still holds (assigned or in progress) with the reason, and fail
    the run: "Needs attention" lists them, and nothing is lost (what its calls gave the agent
    itself, `turns`, gets a follow-up run). `outcome`: what an earlier start's end did."""
    actor = actor or Actor.of(caller_for_agent(run.agent))
    outcome = list(outcome or [])
    note = f"Managed run #{run.pk} stopped: {error}"[:2000]
    try:
        tasks = _held_tasks(run)
    except Exception:
        log.exception("run %s: could not read its tasks", run.pk)
        tasks = []
    for task in tasks:
        _safely(run, token, outcome, task,
                lambda t=task: _move(t, actor, TaskStatus.BLOCKED, note=note), "blocked")  # fmt: skip
    _follow_up_parents_it_finished(run)
    if turns:
        _follow_up_what_it_took_on(run, token, outcome, actor, turns)
    services.run_finish(run=run, token=token, status=RunStatus.FAILED, error=error, outcome=outcome)


def _finished_a_subtask(turns: list[dict]) -> bool:
    """Whether a successful writing call of the run left a subtask finished (its answer, the
    task, says so): only then can the run have finished the last open subtask of a parent."""
    return any(
        turn["kind"] == TurnKind.TOOL_CALL and turn.get("status") == CallStatus.OK
        and isinstance(answer := turn.get("result"), dict) and answer.get("parent") is not None
        and answer.get("status") in FINISHED_STATUSES
        for turn in turns
    )  # fmt: skip


def _follow_up_parents_it_finished(run: Run) -> None:
    """A parent the agent holds, open, whose last open subtask this run finished: its holder is
    not woken by `subtasks_done` for its own act, and this run did not settle it (it acted on it,
    or never saw it), so the agent asks for a follow-up run about it — or it waited for ever."""
    if run.started_at is None:
        return
    parents = Task.objects.filter(
        assignee_id=run.agent_id, status__in=SETTLEABLE,
        events__kind=EventKind.SUBTASKS_DONE, events__actor_agent_id=run.agent_id,
        events__created_at__gte=run.started_at,
    ).distinct()  # fmt: skip
    for parent in parents:
        services.run_wake(agent=run.agent, trigger=EventKind.SUBTASKS_DONE, task=parent)


# The triggers a run's end gives its own agent (its own act wakes it for nothing otherwise).
OWN_FOLLOW_UPS = (EventKind.ASSIGNED, EventKind.SUBTASKS_DONE)

# Why a task a run gave its own agent gets no follow-up run (`_follow_up_what_it_took_on`).
NOT_WORKED = (
    "not worked: the agent gave it to itself in a run that only its own work had woken, and "
    "such a run asks for no follow-up (an agent that gives itself a task in every run would "
    "wake itself for ever). A comment on it, or assigning it, has it worked."
)


def _woken_only_by_its_own_work(run: Run) -> bool:
    """Every trigger of the run is a follow-up an earlier run of the same agent gave it for its
    own work (`OWN_FOLLOW_UPS`, woken by that run): nobody else asked for this run."""
    triggers = run.triggers.values_list("trigger", "woken_by__agent_id")
    return bool(triggers) and all(
        kind in OWN_FOLLOW_UPS and by == run.agent_id for kind, by in triggers
    )


def _follow_up_what_it_took_on(
    run: Run, token: str, outcome: list, actor: Actor, turns: list[dict]
) -> None:
    """Tasks a successful writing call of the run left assigned to its own agent — a task or
    subtask it created for itself, one it claimed — and that it did not hold when its input was
    built: nothing wakes an agent for its own act, so the agent asks for a follow-up run about
    each one it still holds, assigned or in progress, that no trigger reached since — or it
    waited for ever. Read from the calls' answers (the task): no statement for a run that took none on.

    Once per chain: a run that only such follow-ups woke asks for none (a model giving itself a
    new task in every run would otherwise run for ever, each follow-up's answer completing the
    last one); the tasks it gave itself are blocked with the reason ("Needs attention")."""
    handle = run.agent.handle
    ids = {
        answer["id"]
        for turn in turns
        if turn["kind"] == TurnKind.TOOL_CALL and turn.get("status") == CallStatus.OK
        and isinstance(answer := turn.get("result"), dict) and answer.get("assignee") == handle
        and answer.get("status") in SETTLEABLE and isinstance(answer.get("id"), int)
        and not getattr(registry.REGISTRY.get(turn["name"]), "read_only", True)
    } - {t["id"] for t in run.context.get("tasks", []) if t.get("you_hold_it")}  # fmt: skip
    if not ids:
        return
    taken = (
        Task.objects.filter(pk__in=ids, assignee_id=run.agent_id, status__in=SETTLEABLE)
        .filter(services.unseen_since_assigned("assignee_id"))
        .order_by("pk")
    )
    if not _woken_only_by_its_own_work(run):
        for task in taken:
            services.run_wake(agent=run.agent, trigger=EventKind.ASSIGNED, task=task)
        return
    note = f"Managed run #{run.pk}: {NOT_WORKED}"
    for task in taken:
        _safely(run, token, outcome, task,
                lambda t=task: _move(t, actor, TaskStatus.BLOCKED, note=note), "blocked")  # fmt: skip


def _safely(run: Run, token: str, outcome: list, task: Task, move, action: str) -> None:
    """Make the move in its own transaction, while the run still holds its lease (LeaseLost
    otherwise: the run that took it over settles the tasks); a refusal (someone moved the task
    meanwhile) is noted, not raised.

    The lease is checked after the move, in its transaction, by locking the run's row last (a
    move locks its task, then agents; deleting the agent locks the run after those too): a claim
    by another worker waits for the move's commit, or came first and the move is undone."""
    try:
        with undone_whole():
            move()
            if not Run.objects.filter(pk=run.pk, lease_token=token).update(
                heartbeat_at=timezone.now()
            ):
                raise LeaseLost
    except DomainError as exc:
        outcome.append({"task": task.pk, "action": "none", "why": f"{exc.code}: {exc.message}"})
    else:
        outcome.append({"task": task.pk, "action": action})
