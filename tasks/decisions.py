"""What a decision looks like to the API, to a model and in a webhook: one shape, every door."""

from .models import DecisionKind, HumanDecision

AWAITING_APPROVAL = "awaiting_approval"


def decision_json(decision: HumanDecision) -> dict:
    """The decision as `GET /api/decisions/<id>` answers it (docs/decisions.md)."""
    return {
        "id": decision.pk,
        "kind": decision.kind,
        "policy": decision.policy_id,
        "requested_by": decision.requested_by.handle if decision.requested_by_id else None,
        "task": decision.task_id,
        "action": decision.action,
        "reason": decision.reason,
        "question": decision.question,
        "options": list(decision.options),
        "status": decision.status,
        "expires_at": decision.expires_at.isoformat() if decision.expires_at else None,
        "decided_by": decision.decided_by_label or None,
        "decided_at": decision.decided_at.isoformat() if decision.decided_at else None,
        "comment": decision.comment,
        "answer": decision.answer,
        "outcome": decision.outcome,
        "created_at": decision.created_at.isoformat() if decision.created_at else None,
    }


def awaiting_approval(decision: HumanDecision) -> dict:
    """The answer to a gated move, at the REST door (202) and as a tool's result."""
    return {"status": AWAITING_APPROVAL, "decision": decision_json(decision)}


def describe(decision: HumanDecision) -> str:
    """The request in words: the move and its arguments, or the question."""
    if decision.kind == DecisionKind.QUESTION:
        return f"question “{decision.question[:200]}”"
    action = decision.action or {}
    arguments = ", ".join(f"{k}={v}" for k, v in (action.get("arguments") or {}).items())
    return f"{action.get('name', '?')}({arguments[:300]})"
