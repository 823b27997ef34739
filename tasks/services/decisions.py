"""Decisions: a gated move waiting for a human, an agent's question, and how each one ends.

Every transition writes the task's audit row and tells the agent that asked (inbox item of kind
`decision`, its webhook, a wake-up); the deciders hear of new ones by e-mail (`notify`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.utils import timezone

from infrastructure.atomic import atomic
from infrastructure.errors import Conflict, DomainError, Forbidden, Invalid
from organization import registry
from organization.caller import Caller, caller_for_agent, caller_for_key, caller_for_member
from organization.history import acting_as, current_actor
from organization.models import ApiKey, Organization

from .. import events, rules, webhooks
from ..decisions import decision_json, describe
from ..models import (
    ApprovalPolicy,
    DecisionKind,
    DecisionStatus,
    DeliveryStatus,
    HumanDecision,
    OnExpiry,
    PolicyTrigger,
    Task,
    WebhookDelivery,
)
from ..rules import SYSTEM, Actor, approved_decision
from ..selectors import deciders_of, decision_for, task_for
from . import notify

log = logging.getLogger(__name__)

CLOSED = "decision_closed"
# Decisions each part of a sweep handles at most (the next sweep goes on).
SWEEP_BATCH = 500
HUMANS_DECIDE = "Only a human decides: use an organization key or the console."


# --- asking --------------------------------------------------------------------------------------


def target_of(task_id: int | None, arguments: dict | None) -> dict:
    """What a decision is bound to: its task as it is (status, holder, chain) and the arguments."""
    task = None
    if task_id is not None:
        row = (
            Task.objects.filter(pk=task_id)
            .values("status", "assignee__handle", "queued_for__handle", "delegation_chain")
            .first()
        )
        if row is not None:
            task = {
                "status": row["status"],
                "assignee": row["assignee__handle"],
                "queued_for": row["queued_for__handle"],
                "delegation_chain": list(row["delegation_chain"]),
            }
    return {"task": task, "arguments": arguments or {}}


def hash_of(target: dict) -> str:
    return hashlib.sha256(json.dumps(target, sort_keys=True, default=str).encode()).hexdigest()


def check_pending_bound(agent) -> None:
    """An agent has at most DECISIONS_MAX_PENDING_PER_AGENT decisions pending (409
    `too_many_pending_decisions`): every one of them is mail to humans."""
    if agent is None:
        return
    limit = settings.DECISIONS_MAX_PENDING_PER_AGENT
    pending = HumanDecision.objects.filter(requested_by=agent, status=DecisionStatus.PENDING)
    if pending.count() >= limit:
        raise Conflict(
            f"You have {limit} decisions waiting for humans already, the limit: wait for their "
            "answers (or cancel one) before asking again.",
            "too_many_pending_decisions",
        )


def _requester(actor: Actor, org: Organization) -> dict:
    """Who asked, as the decision stores it (an organization key from the change's actor)."""
    key = None
    prefix = current_actor().key_prefix
    if not actor.is_agent and prefix:
        key = ApiKey.objects.filter(organization=org, prefix=prefix, agent__isnull=True).first()
    return {
        "requested_by": actor.agent,
        "requested_by_user": actor.user if not actor.is_agent else None,
        "requested_by_key": key,
        "requester_label": actor.label[:200],
    }


@atomic
def decision_request(
    *,
    org: Organization,
    actor: Actor,
    policy: ApprovalPolicy,
    action: dict,
    task_id: int | None,
    reason: str,
) -> HumanDecision:
    """A gated move: record it as a pending approval, its targets hashed, deciders told."""
    check_pending_bound(actor.agent)
    target = target_of(task_id, action.get("arguments"))
    decision = HumanDecision.objects.create(
        organization=org,
        kind=DecisionKind.APPROVAL,
        policy=policy,
        task_id=task_id if target["task"] is not None else None,
        action=action,
        reason=reason[:2000],
        target=target,
        target_hash=hash_of(target),
        expires_at=timezone.now() + timedelta(seconds=policy.expires_after_seconds),
        **_requester(actor, org),
    )
    _audit(decision, actor, f"{actor.label} asked for approval: {describe(decision)}", tell=False)
    notify.deciders_asked(decision)
    return decision


def escalation_decision(*, task: Task, actor: Actor, source) -> HumanDecision | None:
    """An escalation to humans under an `escalation_to_humans` policy covering `source` (the
    agent it was escalated for): a decision asks a human to pick the taker, approving
    `assign_task` with the `agent_id` they choose, before it expires. In the move's transaction."""
    org = task.organization
    policy = rules.escalation_policy(org=org, agent=source)
    if policy is None:
        return None
    action = {"name": "assign_task", "arguments": {"task_id": task.pk}}
    target = target_of(task.pk, action["arguments"])
    decision = HumanDecision.objects.create(
        organization=org,
        kind=DecisionKind.APPROVAL,
        policy=policy,
        task=task,
        action=action,
        reason="Escalated to humans: pick who takes it (approve with arguments naming agent_id).",
        target=target,
        target_hash=hash_of(target),
        expires_at=timezone.now() + timedelta(seconds=policy.expires_after_seconds),
        **_requester(actor, org),
    )
    _audit(
        decision, actor, f"A human must pick who takes the task: {describe(decision)}", tell=False
    )
    notify.deciders_asked(decision)
    return decision


@atomic
def decision_ask(
    *, caller: Caller, task_id, question: str, options: list[str] | None = None
) -> HumanDecision:
    """An agent asks a human about a task it holds (403 `task_not_held`; 404 if it cannot see it)."""
    agent = caller.require_agent()
    task = task_for(caller, task_id)
    if task.assignee_id != agent.pk:
        raise Forbidden(
            f"You can ask about a task you hold only; task #{task.pk} is held by "
            f"{task.assignee.handle if task.assignee_id else 'nobody'}.",
            "task_not_held",
        )
    check_pending_bound(agent)
    seconds = settings.DECISIONS_QUESTION_EXPIRES_SECONDS
    actor = Actor.of(caller)
    decision = HumanDecision.objects.create(
        organization=caller.organization,
        kind=DecisionKind.QUESTION,
        task=task,
        question=question,
        options=list(options or []),
        target=target_of(task.pk, None),
        expires_at=timezone.now() + timedelta(seconds=seconds) if seconds else None,
        **_requester(actor, caller.organization),
    )
    _audit(decision, actor, f"{agent.handle} asked a human: {question[:200]}", tell=False)
    notify.deciders_asked(decision)
    return decision


# --- deciding ------------------------------------------------------------------------------------


def check_decider(caller: Caller, decision: HumanDecision) -> None:
    """Humans decide (403 `human_required`), never on their own request (403 `own_request`), and
    a member only if the policy names them (or names no one and they are an admin)."""
    if caller.agent is not None:
        raise Forbidden(HUMANS_DECIDE, "human_required")
    if caller.label == decision.requester_label or (
        caller.user is not None and caller.user.pk == decision.requested_by_user_id
    ):
        raise Forbidden("No one decides a request their own action raised.", "own_request")
    if caller.user is not None and not caller.user.is_superuser:
        if caller.user.pk not in {u.pk for u in deciders_of(decision)}:
            raise Forbidden(
                "The decision's policy does not name you as a decider.", "not_a_decider"
            )


def _locked(caller: Caller, pk) -> HumanDecision:
    """The decision locked for a verdict: humans only (an agent key: 403 at once), pending."""
    if caller.agent is not None:
        raise Forbidden(HUMANS_DECIDE, "human_required")
    decision = decision_for(caller, pk)
    decision = (
        HumanDecision.objects.select_for_update(of=("self",))
        .select_related("requested_by", "policy")
        .get(pk=decision.pk)
    )
    check_decider(caller, decision)
    if not decision.is_pending:
        raise Conflict(f"The decision is {decision.status} already.", CLOSED)
    return decision


def _close(
    decision: HumanDecision,
    status: str,
    *,
    by: Caller | None,
    comment: str = "",
    answer: str = "",
    outcome: dict | None = None,
) -> None:
    decision.status = status
    decision.decided_at = timezone.now()
    if by is not None:
        decision.decided_by = by.user
        decision.decided_by_label = by.label[:200]
    decision.comment = comment
    decision.answer = answer
    decision.outcome = outcome
    decision.save()


def _changed(decision: HumanDecision) -> bool:
    if decision.kind != DecisionKind.APPROVAL:
        return False
    arguments = (decision.action or {}).get("arguments")
    return hash_of(target_of(decision.task_id, arguments)) != decision.target_hash


def decision_approve(
    *, caller: Caller, pk, arguments: dict | None = None, comment: str = ""
) -> HumanDecision:
    """Approve: the move runs through its tool's service as the requester, and the outcome is
    kept. A changed target supersedes the decision instead (409 `target_changed`)."""
    with transaction.atomic():
        decision = _locked(caller, pk)
        if decision.kind != DecisionKind.APPROVAL:
            raise Conflict("A question is answered, not approved.", "not_an_approval")
        if _changed(decision):
            _supersede(decision, Actor.of(caller))
            superseded = True
        else:
            superseded = False
            if arguments is not None:
                _validated(decision, arguments)  # 400 before anything is written
                decision.action = {**decision.action, "arguments": arguments}
            picker = picks_the_taker(decision)
            if picker and not decision.action["arguments"].get("agent_id"):
                raise Invalid("arguments.agent_id: pick the agent who takes the task.")
            outcome = execute(decision, as_caller=caller if picker else None)
            _close(decision, DecisionStatus.APPROVED, by=caller, comment=comment, outcome=outcome)
            _audit(decision, Actor.of(caller), f"{caller.label} approved: {describe(decision)}.")
    if superseded:
        raise Conflict(
            "What the decision was asked about changed since (the task moved): it is superseded.",
            "target_changed",
        )
    return decision


@atomic
def decision_close(
    *, caller: Caller, pk, status: str, comment: str = "", answer: str = ""
) -> HumanDecision:
    """Reject, request changes or answer a pending decision (`status` says which)."""
    decision = _locked(caller, pk)
    if status == DecisionStatus.ANSWERED:
        if decision.kind != DecisionKind.QUESTION:
            raise Conflict(
                "Only a question is answered; approve or reject this one.", "not_a_question"
            )
        if decision.options and answer not in decision.options:
            raise Invalid(f"answer: must be one of the options: {', '.join(decision.options)}.")
    elif decision.kind != DecisionKind.APPROVAL:
        raise Conflict("A question is answered (or cancelled), not rejected.", "not_an_approval")
    _close(decision, status, by=caller, comment=comment, answer=answer)
    verb = {"rejected": "rejected", "changes_requested": "asked for changes to"}.get(status)
    if verb:
        message = f"{caller.label} {verb}: {describe(decision)}."
    else:
        message = f"{caller.label} answered: {answer[:500]}"
    _audit(decision, Actor.of(caller), message + (f" {comment}" if comment else ""))
    return decision


@atomic
def decision_cancel(*, caller: Caller, pk) -> HumanDecision:
    """The requester withdraws its pending decision."""
    decision = decision_for(caller, pk)
    decision = HumanDecision.objects.select_for_update(of=("self",)).get(pk=decision.pk)
    mine = (caller.agent is not None and caller.agent.pk == decision.requested_by_id) or (
        caller.agent is None and caller.label == decision.requester_label
    )
    if not mine:
        raise Forbidden("Only the one who asked cancels a decision.", "not_the_requester")
    if not decision.is_pending:
        raise Conflict(f"The decision is {decision.status} already.", CLOSED)
    _close(decision, DecisionStatus.CANCELLED, by=None)
    _audit(
        decision, Actor.of(caller), f"{caller.label} withdrew: {describe(decision)}.", tell=False
    )
    return decision


# --- running an approved move --------------------------------------------------------------------


def requester_caller(decision: HumanDecision) -> Caller:
    """The requester as a caller: the approved move runs as it would have."""
    if decision.requested_by_id:
        return caller_for_agent(decision.requested_by)
    if decision.requested_by_key_id:
        return caller_for_key(decision.requested_by_key)
    return caller_for_member(decision.requested_by_user, decision.organization)


def _tool(decision: HumanDecision) -> registry.Tool:
    tool = registry.REGISTRY.get((decision.action or {}).get("name", ""))
    if tool is None:
        raise Invalid("The decision's move is no tool of the registry.", "unknown_tool")
    return tool


def _validated(decision: HumanDecision, arguments: dict) -> dict:
    """`arguments` validated as the move's own input (400 `invalid` naming the param)."""
    if not isinstance(arguments, dict):
        raise Invalid("arguments must be an object.")
    tool, caller = _tool(decision), requester_caller(decision)
    params = registry.without_nulls(tool.input_schema, dict(arguments))
    return registry.validate_params(tool, params, caller)


def picks_the_taker(decision: HumanDecision) -> bool:
    """A decision on an escalation to humans: the human who approves picks the taker, and the
    assignment is theirs (no move of the requester waits: the escalation happened)."""
    return decision.policy_id is not None and (
        decision.policy.trigger == PolicyTrigger.ESCALATION_TO_HUMANS
    )


def execute(decision: HumanDecision, as_caller: Caller | None = None) -> dict:
    """Run the approved move as the requester (`as_caller`: the human who picked the taker),
    the gate open for it: the outcome it had."""
    token = approved_decision.set(decision.pk)
    try:
        caller = as_caller or requester_caller(decision)
        with transaction.atomic(), acting_as(caller):
            params = _validated(decision, decision.action.get("arguments") or {})
            _tool(decision).handler(caller, params)
    except DomainError as exc:
        return {"result": "failed", "reason": f"{exc.code}: {exc.message}"}
    finally:
        approved_decision.reset(token)
    return {"result": "executed", "reason": ""}


# --- expiry and the moved target (the beat's sweep) ----------------------------------------------


def _supersede(decision: HumanDecision, actor: Actor) -> None:
    skipped = {"result": "skipped", "reason": "what it was asked about changed"}
    _close(decision, DecisionStatus.SUPERSEDED, by=None, outcome=skipped)
    _audit(
        decision, actor, f"Superseded (the task changed since it was asked): {describe(decision)}."
    )


def decisions_sweep(now: datetime | None = None) -> dict:
    """Warn the deciders of what expires soon, expire what is due (on_expiry applied), and
    supersede approvals whose target changed: each in its own transaction, a failing one
    logged and left for the next sweep."""
    now = now or timezone.now()
    counts = {"warned": 0, "expired": 0, "superseded": 0}
    pending = HumanDecision.objects.filter(status=DecisionStatus.PENDING)
    due = pending.filter(expires_at__lte=now).order_by("expires_at")
    for pk in due.values_list("pk", flat=True)[:SWEEP_BATCH]:
        counts["expired"] += _each(_expire, pk, now)
    warn_at = ExpressionWrapper(
        F("expires_at") - Value(timedelta(seconds=1)) * F("policy__warn_before_seconds"),
        output_field=DateTimeField(),
    )
    warnable = pending.filter(warned_at__isnull=True, policy__warn_before_seconds__gt=0)
    warnable = warnable.alias(warn_at=warn_at).filter(warn_at__lte=now, expires_at__gt=now)
    for pk in warnable.order_by("expires_at").values_list("pk", flat=True)[:SWEEP_BATCH]:
        counts["warned"] += _each(_warn, pk, now)
    approvals = pending.filter(kind=DecisionKind.APPROVAL, task__isnull=False).order_by("pk")
    for decision in approvals[:SWEEP_BATCH]:
        if _changed(decision):
            counts["superseded"] += _each(_supersede_by_pk, decision.pk)
    return counts


def _each(step, *args) -> int:
    try:
        return step(*args)
    except Exception:
        log.exception(
            "decision sweep: %s%s failed; the next sweep tries again", step.__name__, args
        )
        return 0


@atomic
def _warn(pk: int, now: datetime) -> int:
    decision = (
        HumanDecision.objects.select_for_update(of=("self",)).filter(pk=pk, warned_at=None).first()
    )
    if decision is None or not decision.is_pending:
        return 0
    decision.warned_at = now
    decision.save(update_fields=["warned_at"])
    notify.deciders_warned(decision)
    return 1


@atomic
def _supersede_by_pk(pk: int) -> int:
    decision = HumanDecision.objects.select_for_update(of=("self",)).filter(pk=pk).first()
    if decision is None or not decision.is_pending or not _changed(decision):
        return 0
    _supersede(decision, SYSTEM)
    return 1


@atomic
def _expire(pk: int, now: datetime) -> int:
    """Expired: an approval is rejected (fail closed) unless its policy says approve."""
    decision = (
        HumanDecision.objects.select_for_update(of=("self",))
        .select_related("policy")
        .filter(pk=pk)
        .first()
    )
    if decision is None or not decision.is_pending or decision.expires_at > now:
        return 0
    approve = decision.policy_id and decision.policy.on_expiry == OnExpiry.APPROVE
    # No human picked a taker: the task stays escalated, whatever the policy says.
    approve = approve and not picks_the_taker(decision)
    if decision.kind == DecisionKind.APPROVAL and approve and not _changed(decision):
        outcome = execute(decision)
    else:
        outcome = {"result": "skipped", "reason": "expired before a human decided"}
    _close(decision, DecisionStatus.EXPIRED, by=None, outcome=outcome)
    how = "executed as its policy says" if outcome["result"] == "executed" else "not executed"
    _audit(decision, SYSTEM, f"Expired with no human decision ({how}): {describe(decision)}.")
    return 1


# --- what a decision says, and whom it tells -----------------------------------------------------


def _audit(decision: HumanDecision, actor: Actor, message: str, *, tell: bool = True) -> None:
    """The organization's webhook, and the task's audit row (a decision about no task has
    none); `tell`: the asking agent gets an inbox item of kind `decision`, its webhook and a
    wake-up (a managed agent's run)."""
    _to_organization_webhook(decision, message)
    if decision.task_id is None:
        return
    task = Task.objects.select_related("organization", "assignee", "queued_for").get(
        pk=decision.task_id
    )
    status = f" [decision #{decision.pk}: {decision.status}]"
    recipient = decision.requested_by if tell else None
    events.decision_event(task=task, actor=actor, message=message[:1800] + status, tell=recipient)


def _to_organization_webhook(decision: HumanDecision, message: str) -> None:
    """Every transition reaches the organization's webhook, if set, signed and retried as every
    delivery (`decision.<status>`)."""
    org = Organization.objects.only("webhook_url", "slug").get(pk=decision.organization_id)
    if not org.webhook_url:
        return
    delivery = WebhookDelivery.objects.create(
        organization=org,
        agent=None,
        url=org.webhook_url,
        payload={
            "event": f"decision.{decision.status}",
            "organization": org.slug,
            "message": message,
            "decision": decision_json(decision),
            "created_at": timezone.now().isoformat(),
        },
        status=DeliveryStatus.PENDING,
    )
    webhooks.enqueue_deliveries([delivery.pk])
