"""The approval gate at the services' edge: a move a policy gates (`rules.check_policies`) is
undone and recorded as a decision, and its door answers 202 `awaiting_approval`.

The gate itself is checked with the rules, under the move's locks; this module turns its
`GateClosed` into the decision, after the move's savepoint is rolled back (docs/decisions.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.db import transaction

from infrastructure.errors import DomainError
from organization import registry
from organization.caller import Caller
from organization.models import Agent, Organization

from .. import rules
from ..decisions import AWAITING_APPROVAL, awaiting_approval
from ..models import HumanDecision, Task
from ..rules import Actor, GateClosed
from ..selectors import VisibleTask, tasks_visible_to
from .decisions import decision_request


class AwaitingApproval(DomainError):
    """A gated move: 202 with `{"status": "awaiting_approval", "decision": {...}}`; a tool
    returns the same body as its result (`registry.call_tool`)."""

    def __init__(self, decision: HumanDecision):
        super().__init__(
            "The move waits for a human's approval.",
            AWAITING_APPROVAL,
            202,
            body=awaiting_approval(decision),
        )
        self.decision = decision


def _organization(kwargs: dict) -> Organization | None:
    """The move's organization if it is at hand without a query, else None."""
    if kwargs.get("org") is not None:
        return kwargs["org"]
    task = kwargs.get("task")
    if isinstance(task, VisibleTask):
        return task.caller.organization
    if isinstance(task, Task) and Task.organization.is_cached(task):
        return task.organization
    return None


def _task_id(task) -> int | None:
    if isinstance(task, VisibleTask):
        return task.task_id
    return task.pk if isinstance(task, Task) else None


def _handle(agent) -> str | None:
    return agent.handle if isinstance(agent, Agent) else agent


def _given(arguments: dict) -> dict:
    """The arguments a call would send: what is not given is left out."""
    return {k: v for k, v in arguments.items() if v not in (None, "")}


def gated(tool: str, arguments: Callable[[dict], dict]):
    """Decorate a move service: when its organization has approval policies, the move runs in a
    savepoint, and a `GateClosed` from its rules becomes a decision for the move `tool` with
    `arguments(kwargs)` (the tool's params), raised as `AwaitingApproval`."""

    def decorator(service):
        @functools.wraps(service)
        def wrapper(**kwargs):
            org = _organization(kwargs)
            if org is not None and not rules.gate_applies(org):
                return service(**kwargs)
            try:
                if org is None:
                    # Not at hand (a task given by id): the service's own block undoes it.
                    return service(**kwargs)
                # Its own savepoint: undone alone, even where its caller undoes its whole
                # transaction on any failure (infrastructure.atomic.undone_whole).
                with transaction.atomic():
                    return service(**kwargs)
            except GateClosed as closed:
                org = closed.org
                task_id = _task_id(kwargs.get("task"))
                decision = decision_request(
                    org=org,
                    actor=kwargs["actor"],
                    policy=closed.policy,
                    action={"name": tool, "arguments": _given(arguments(kwargs))},
                    task_id=task_id,
                    reason=closed.reason,
                )
                raise AwaitingApproval(decision) from None

        return wrapper

    return decorator


def create_arguments(kw: dict) -> dict:
    deadline = kw.get("deadline")
    return {
        "title": kw["title"],
        "description": kw.get("description"),
        "required_expertise": kw.get("required_expertise"),
        "urgency": kw.get("urgency"),
        "deadline": deadline.isoformat() if deadline else None,
        "agent_id": _handle(kw.get("assignee")),
        "parent": _task_id(kw.get("parent")),
    }


def move_arguments(kw: dict) -> dict:
    """A move's params: its task, its target, and the rest of its keywords as they are."""
    rest = {k: v for k, v in kw.items() if k not in ("task", "actor", "to")}
    return {"task_id": _task_id(kw["task"]), "agent_id": _handle(kw.get("to")), **rest}


def tool_gate(caller: Caller, tool: registry.Tool, params: dict) -> None:
    """The registry's gate (`registry.GATES`): an agent's call of a tool a policy names."""
    try:
        rules.check_tool_policies(org=caller.organization, agent=caller.agent, tool=tool.name)
    except GateClosed as closed:
        task_id = params.get("task_id") or params.get("task")
        if task_id is not None and not tasks_visible_to(caller).filter(pk=_as_id(task_id)).exists():
            task_id = None
        decision = decision_request(
            org=caller.organization,
            actor=Actor.of(caller),
            policy=closed.policy,
            action={"name": tool.name, "arguments": params},
            task_id=_as_id(task_id),
            reason=closed.reason,
        )
        raise AwaitingApproval(decision) from None


def _as_id(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
